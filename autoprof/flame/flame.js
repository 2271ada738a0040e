// Interactivity of autoprof's flame graphs: zoom, reset, regex search, details line.
// Each frame is <g class="f" data-n=name data-s=start data-v=value data-d=depth>; start and
// value are in weight units, so zooming rescales without rounding drift.
(function () {
  "use strict";
  var svg = document.documentElement;
  var total = +svg.getAttribute("data-total");
  var pad = +svg.getAttribute("data-pad");
  var glyph = +svg.getAttribute("data-font") * +svg.getAttribute("data-char");
  var minwidth = +svg.getAttribute("data-minwidth");
  var span = +svg.getAttribute("width") - 2 * pad;
  var frames = Array.prototype.slice.call(document.querySelectorAll("g.f"));
  var details = document.getElementById("details");
  var reset = document.getElementById("reset");
  var search = document.getElementById("search");
  var matched = document.getElementById("matched");
  var zoomed = null;

  function num(g, key) { return +g.getAttribute("data-" + key); }

  function label(name, width) {
    var fits = Math.floor(width / glyph);
    if (fits < 3) return "";
    return name.length <= fits ? name : name.slice(0, fits - 2) + "..";
  }

  function place(g, x, w) {
    var rect = g.querySelector("rect"), text = g.querySelector("text");
    rect.setAttribute("x", x.toFixed(2));
    rect.setAttribute("width", w.toFixed(2));
    text.setAttribute("x", (x + 3).toFixed(2));
    text.textContent = label(g.getAttribute("data-n"), w);
  }

  // Show `target`'s subtree across the full width; its ancestors stay, full width and faded.
  function zoom(target) {
    var s0 = num(target, "s"), v0 = num(target, "v"), d0 = num(target, "d");
    var scale = span / v0;
    frames.forEach(function (g) {
      var s = num(g, "s"), v = num(g, "v"), d = num(g, "d");
      g.classList.remove("parent", "hidden");
      if (d < d0 && s <= s0 && s + v >= s0 + v0) {
        g.classList.add("parent");
        place(g, pad, span);
      } else if (d >= d0 && s >= s0 && s + v <= s0 + v0 && v * scale >= minwidth) {
        place(g, pad + (s - s0) * scale, v * scale);
      } else {
        g.classList.add("hidden");
      }
    });
    zoomed = target;
    reset.classList.remove("hidden");
  }

  function unzoom() {
    var scale = span / total;
    frames.forEach(function (g) {
      g.classList.remove("parent", "hidden");
      place(g, pad + num(g, "s") * scale, num(g, "v") * scale);
    });
    zoomed = null;
    reset.classList.add("hidden");
  }

  // Colour matching frames; report how many matched and their share of all samples (nested
  // matches are counted once: the union of their spans).
  function find(pattern) {
    var re = null;
    if (pattern) {
      try { re = new RegExp(pattern); } catch (e) { matched.textContent = "invalid regex"; return; }
    }
    var spans = [], count = 0;
    frames.forEach(function (g) {
      var rect = g.querySelector("rect");
      if (!rect.hasAttribute("data-fill")) rect.setAttribute("data-fill", rect.getAttribute("fill"));
      var hit = re !== null && num(g, "d") > 0 && re.test(g.getAttribute("data-n"));
      rect.setAttribute("fill", hit ? "rgb(230,0,230)" : rect.getAttribute("data-fill"));
      if (hit) { count++; spans.push([num(g, "s"), num(g, "s") + num(g, "v")]); }
    });
    spans.sort(function (a, b) { return a[0] - b[0] || b[1] - a[1]; });
    var covered = 0, end = -1;
    spans.forEach(function (sp) {
      if (sp[0] >= end) { covered += sp[1] - sp[0]; end = sp[1]; }
      else if (sp[1] > end) { covered += sp[1] - end; end = sp[1]; }
    });
    matched.textContent = re === null ? "" :
      "Matched: " + count + " frame" + (count === 1 ? "" : "s") + ", " +
      (total ? (100 * covered / total).toFixed(2) : "0.00") + "%";
  }

  frames.forEach(function (g) {
    g.addEventListener("click", function () { if (num(g, "d") === 0) unzoom(); else zoom(g); });
    g.addEventListener("mouseover", function () {
      details.textContent = g.querySelector("title").textContent;
    });
    g.addEventListener("mouseout", function () { details.textContent = " "; });
  });
  reset.addEventListener("click", unzoom);
  search.addEventListener("input", function () { find(search.value); });
  search.addEventListener("keydown", function (e) { if (e.key === "Enter") find(search.value); });
  document.addEventListener("keydown", function (e) {
    if (e.key === "Escape") { if (zoomed) unzoom(); search.value = ""; find(""); }
    if ((e.ctrlKey || e.metaKey) && e.key === "f") { e.preventDefault(); search.focus(); }
  });
})();
