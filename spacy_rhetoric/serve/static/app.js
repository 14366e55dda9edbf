/* The page of `rhetoric serve`: POST /analyze (the analysis record), then
   POST /render (the same HTML the static report shows), then the sentence
   panel of rhetoric.js. Suggestions (POST /suggest) when /health says a
   generator is configured. No dependencies, no build step. */
(function () {
  "use strict";
  var input = document.getElementById("essay-input");
  var result = document.getElementById("result");
  var status = document.getElementById("status");
  var panel = document.getElementById("rh-panel");
  var state = {suggest: false, record: null};

  function postJSON(url, body) {
    return fetch(url, {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)})
      .then(function (resp) {
        return resp.json().catch(function () { return {}; }).then(function (data) {
          if (!resp.ok) {
            var message = (data.error && data.error.message) || ("HTTP " + resp.status);
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
