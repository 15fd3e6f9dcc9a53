// loupe explorer: the one script. The pages work without it; it adds "expand all" and
// "collapse all" to call trees. It reads and writes no page text, only `open` attributes.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll(".tree-tools").forEach(function (tools) {
    var tree = tools.nextElementSibling;
    if (!tree) return;
    [["Expand all", true], ["Collapse all", false]].forEach(function (pair) {
      var button = document.createElement("button");
      button.type = "button";
      button.textContent = pair[0];
      button.addEventListener("click", function () {
        tree.querySelectorAll("details.frame").forEach(function (d) { d.open = pair[1]; });
      });
      tools.appendChild(button);
    });
  });
});
