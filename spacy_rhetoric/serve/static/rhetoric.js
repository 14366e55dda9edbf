/* spacy-rhetoric: the sentence panel over a rendered essay (see
   spacy_rhetoric/serve/render.py for the markup). Shared by the page of
   `rhetoric serve` and the static report (inlined there). No dependencies.

   RhetoricView.bind(root, panel, options): hovering over a sentence
   (span.rh-sent) of root shows its devices, form, content and scores,
   components and parallelism branches in panel; a click pins it.
   options.suggest(sentenceIndex, rhetoric, object, docElement) -> Promise of
   the /suggest answer: when given (and options.suggestEnabled(), if given,
   is true), a literal sentence gets a "suggest" form. */
(function () {
  "use strict";

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function list(items) {
    var ul = el("ul");
    items.forEach(function (item) { ul.appendChild(el("li", {}, item)); });
    return ul;
  }

  function describe(sent, panel, options) {
    panel.textContent = "";
    var close = el("button", {"class": "rh-close", "type": "button", "title": "close"}, "\u00d7");
    close.addEventListener("click", function () { unpin(panel); panel.hidden = true; });
    panel.appendChild(close);
    var index = sent.getAttribute("data-sentence");
    var labels = sent.getAttribute("data-rhetoric") || "";
    panel.appendChild(el("h3", {}, "\u53e5 sentence " + (Number(index) + 1) + " \u00b7 " + (labels || "\u2013")));
    panel.appendChild(el("div", {"class": "rh-panel-text"}, sent.textContent.trim()));
    var lines = (sent.getAttribute("title") || "").split("\n").filter(Boolean);
    if (lines.length) panel.appendChild(list(lines));
    var comps = Array.prototype.slice.call(sent.querySelectorAll(".rh-comp.rh-first"));
    if (comps.length) {
      panel.appendChild(el("b", {}, "\u6210\u5206 components"));
      panel.appendChild(list(comps.map(function (c) {
        var key = c.getAttribute("data-key");
        var text = Array.prototype.map.call(sent.querySelectorAll('.rh-comp[data-key="' + key + '"]'),
          function (p) { return p.textContent; }).join("");
        return (c.getAttribute("title") || c.getAttribute("data-component")) + ": " + text;
      })));
    }
    var branches = Array.prototype.slice.call(sent.querySelectorAll(".rh-branch.rh-first"));
    if (branches.length) {
      panel.appendChild(el("b", {}, "\u6392\u6bd4 parallelism branches"));
      panel.appendChild(list(branches.map(function (b) { return b.getAttribute("title"); })));
    }
    if (options.suggest && labels === "literal" && (!options.suggestEnabled || options.suggestEnabled())) {
      panel.appendChild(suggestForm(sent, Number(index), options));
    }
    panel.hidden = false;
  }

  function numberInput(cls, value, min, max, step, title) {
    return el("input", {"class": cls, "type": "number", "value": value, "min": min, "max": max,
                        "step": step, "title": title, "size": "4"});
  }

  /* One returned candidate: the sentence, a verified / unverified badge,
     and the analyser's evidence (the spans it found) or its reason. */
  function candidateItem(c) {
    var li = el("li", {"class": c.verified ? "rh-verified" : "rh-unverified"});
    li.appendChild(el("span", {"class": "rh-badge-verify"},
      c.verified ? "\u2713 \u5df2\u9a8c\u8bc1 verified" : (c.verified === false ? "\u672a\u9a8c\u8bc1 unverified" : "\u672a\u68c0\u67e5 not checked")));
    li.appendChild(document.createTextNode(" " + c.text +
      (c.score === null || c.score === undefined ? "" : " (" + Number(c.score).toFixed(2) + ")")));
    var found = (c.evidence || []).map(function (e) { return e.label + " \u300c" + e.text + "\u300d"; });
    var detail = c.verified ? found.join(" \u00b7 ") : (c.reason || "");
    if (detail) li.appendChild(el("div", {"class": "rh-evidence"}, detail));
    return li;
  }

  function suggestForm(sent, index, options) {
    var box = el("div", {"class": "rh-suggest"});
    box.appendChild(el("b", {}, "\u6539\u5199\u5efa\u8bae suggest a rewrite"));
    box.appendChild(el("br"));
    var select = el("select", {"class": "rh-suggest-rhetoric"});
    [["metaphor", "\u6bd4\u55bb metaphor"], ["personification", "\u6bd4\u62df personification"],
     ["hyperbole", "\u5938\u5f20 hyperbole"], ["parallelism", "\u6392\u6bd4 parallelism"]].forEach(function (o) {
      select.appendChild(el("option", {"value": o[0]}, o[1]));
    });
    var object = el("input", {"class": "rh-suggest-object", "type": "text",
                              "placeholder": "\u5bf9\u8c61 object"});
    var n = numberInput("rh-suggest-n", "8", "1", "16", "1", "N: candidates to draw");
    var budget = numberInput("rh-suggest-budget", "0", "0", "600", "1", "time budget in seconds (0 = none)");
    var wAnalyser = numberInput("rh-suggest-w-analyser", "1", "0", "10", "0.1", "ranking weight of the analyser's score");
    var wFluency = numberInput("rh-suggest-w-fluency", "0.1", "0", "10", "0.1", "ranking weight of fluency (KenLM)");
    var button = el("button", {"class": "rh-suggest-button", "type": "button"}, "\u5efa\u8bae suggest");
    var out = el("div", {"class": "rh-suggest-result"});
    [select, object, button].forEach(function (node) { box.appendChild(node); box.appendChild(document.createTextNode(" ")); });
    var settings = el("div", {"class": "rh-suggest-settings"});
    [["N", n], ["\u79d2 budget s", budget], ["w analyser", wAnalyser], ["w fluency", wFluency]].forEach(function (pair) {
      var label = el("label", {}, pair[0] + " ");
      label.appendChild(pair[1]);
      settings.appendChild(label); settings.appendChild(document.createTextNode(" "));
    });
    box.appendChild(settings);
    box.appendChild(out);
    button.addEventListener("click", function () {
      out.textContent = "\u2026";
      out.removeAttribute("data-state");
      var chosen = {n: Number(n.value) || 8, time_budget: Number(budget.value) || 0,
                    weights: {analyser: Number(wAnalyser.value), fluency: Number(wFluency.value)}};
      options.suggest(index, select.value, object.value.trim(), sent.closest(".rh-doc"), chosen).then(function (answer) {
        out.textContent = "";
        out.appendChild(el("div", {}, "\u5bf9\u8c61 object: " + (answer.object || "")));
        if (answer.message) out.appendChild(el("div", {"class": "rh-suggest-message"}, answer.message));
        var cands = answer.candidates || [];
        if (cands.length) {
          var ul = el("ul", {"class": "rh-candidates"});
          cands.forEach(function (c) { ul.appendChild(candidateItem(c)); });
          out.appendChild(ul);
        } else out.appendChild(el("div", {"class": "rh-error"}, "no candidate"));
        out.setAttribute("data-state", "done");
      }, function (err) {
        out.textContent = String(err && err.message ? err.message : err);
        out.setAttribute("data-state", "error");
      });
    });
    return box;
  }

  var pinned = null;

  function unpin(panel) {
    if (pinned) pinned.classList.remove("rh-selected");
    pinned = null;
  }

  function bind(root, panel, options) {
    options = options || {};
    root.addEventListener("mouseover", function (event) {
      if (pinned) return;
      var sent = event.target.closest && event.target.closest(".rh-sent");
      if (sent && root.contains(sent)) describe(sent, panel, options);
    });
    root.addEventListener("click", function (event) {
      var sent = event.target.closest && event.target.closest(".rh-sent");
      if (!sent || !root.contains(sent)) return;
      unpin(panel);
      pinned = sent;
      sent.classList.add("rh-selected");
      describe(sent, panel, options);
    });
  }

  window.RhetoricView = {bind: bind, describe: describe};
})();
