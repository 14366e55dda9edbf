/* The page of `rhetoric serve`: POST /analyze (the analysis record), then
   POST /render (the same HTML the static report shows), then the sentence
   panel of rhetoric.js. Suggestions (POST /suggest) when /health says a
   generator is configured. When /health says the service needs a token
   (rhetoric serve --auth-token-env), the page asks for it once, keeps it in
   sessionStorage (this tab only) and sends it as "Authorization: Bearer";
   a 401 asks again. No dependencies, no build step, no inline script. */
(function () {
  "use strict";
  var input = document.getElementById("essay-input");
  var result = document.getElementById("result");
  var status = document.getElementById("status");
  var panel = document.getElementById("rh-panel");
  var tokenForm = document.getElementById("token-form");
  var tokenInput = document.getElementById("token-input");
  var tokenStatus = document.getElementById("token-status");
  var TOKEN_KEY = "spacy-rhetoric-token";
  var state = {suggest: false, record: null};

  function storedToken() {
    try { return window.sessionStorage.getItem(TOKEN_KEY) || ""; } catch (e) { return state.token || ""; }
  }

  function storeToken(value) {
    state.token = value;
    try {
      if (value) window.sessionStorage.setItem(TOKEN_KEY, value); else window.sessionStorage.removeItem(TOKEN_KEY);
    } catch (e) { /* storage disabled: kept in this page only */ }
  }

  function askToken(message) {
    tokenStatus.textContent = message || "";
    tokenForm.hidden = false;
    tokenInput.focus();
  }

  tokenForm.addEventListener("submit", function (event) {
    event.preventDefault();
    storeToken(tokenInput.value.trim());
    tokenInput.value = "";
    tokenForm.hidden = !!storedToken();
    tokenStatus.textContent = "";
    status.textContent = storedToken() ? "口令已保存 token saved" : "";
  });

  function postJSON(url, body) {
    var headers = {"Content-Type": "application/json"};
    var token = storedToken();
    if (token) headers.Authorization = "Bearer " + token;
    return fetch(url, {method: "POST", headers: headers, body: JSON.stringify(body)})
      .then(function (resp) {
        return resp.json().catch(function () { return {}; }).then(function (data) {
          if (!resp.ok) {
            var message = (data.error && data.error.message) || ("HTTP " + resp.status);
            if (resp.status === 401) {
              storeToken("");
              askToken(token ? "口令不对 wrong token: please type it again" : "");
              message = "需要访问口令 this service needs its access token: type it above";
            } else if (resp.status === 429) {
              message = "请求太多 too many requests: please wait a moment and try again";
            } else if (resp.status === 503 && url === "/suggest") {
              message = "改写建议暂不可用 suggestions are not available right now";
            }
            var err = new Error(message);
            err.status = resp.status;
            throw err;
          }
          return data;
        });
      });
  }

  function suggest(index, rhetoric, object, doc, settings) {
    var body = {text: state.record ? state.record.text : input.value, sentence: index, rhetoric: rhetoric};
    if (object) body.object = object;
    if (settings) { body.n = settings.n; body.time_budget = settings.time_budget; body.weights = settings.weights; }
    return postJSON("/suggest", body);
  }

  fetch("/health").then(function (r) { return r.json(); }).then(function (h) {
    var model = h.model || {};
    document.getElementById("model").textContent = "模型 model: " + (model.name || "?") + " " + (model.version || "") +
      " · " + (h.pipeline || []).join(" → ") + (h.suggest ? " · 改写建议 suggestions on" : "");
    state.suggest = !!h.suggest;
    if (h.auth && !storedToken()) askToken();
  }).catch(function () { document.getElementById("model").textContent = "service unreachable"; });

  document.getElementById("analyse-form").addEventListener("submit", function (event) {
    event.preventDefault();
    var text = input.value;
    result.setAttribute("data-state", "loading");
    status.textContent = "分析中 analysing…";
    panel.hidden = true;
    var started = Date.now();
    postJSON("/analyze", {text: text}).then(function (record) {
      state.record = record;
      return postJSON("/render", record);
    }).then(function (rendered) {
      result.innerHTML = rendered.html;
      window.rhetoricRecord = state.record;
      var s = state.record.summary || {};
      status.textContent = "完成 done: " + (s.sentences || 0) + " 句 sentences in " +
        ((Date.now() - started) / 1000).toFixed(1) + " s";
      result.setAttribute("data-state", "done");
    }).catch(function (err) {
      result.textContent = "";
      var p = document.createElement("p");
      p.className = "rh-error";
      p.textContent = "错误 error: " + err.message;
      result.appendChild(p);
      status.textContent = "";
      result.setAttribute("data-state", "error");
    });
  });

  document.getElementById("clear").addEventListener("click", function () {
    input.value = "";
    result.textContent = "";
    result.setAttribute("data-state", "empty");
    panel.hidden = true;
    status.textContent = "";
    input.focus();
  });

  RhetoricView.bind(result, panel, {suggest: function (i, r, o, d, settings) {
    return state.suggest ? suggest(i, r, o, d, settings) : Promise.reject(new Error("no generator configured"));
  }, suggestEnabled: function () { return state.suggest; }});
})();
