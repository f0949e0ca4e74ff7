// The operators' page refreshes in place: every few seconds it fetches the page again (the browser
// sends the same Basic credentials) and swaps in the new sections; the scroll position stays.
"use strict";
(function () {
  const sections = () => document.getElementById("sections");
  if (!sections()) return;
  const status = document.getElementById("refresh-status");
  const seconds = Number(sections().dataset.refreshSeconds) || 10;

  async function refresh() {
    try {
      const answer = await fetch(location.href, { cache: "no-store", credentials: "same-origin" });
      if (!answer.ok) throw new Error("the relay answered " + answer.status);
      const page = new DOMParser().parseFromString(await answer.text(), "text/html");
      const fresh = page.getElementById("sections");
      if (!fresh) throw new Error("the answer has no figures");
      sections().replaceWith(document.adoptNode(fresh));
      status.textContent = "";
    } catch (error) {
      status.textContent = "Not refreshed (" + error.message + "): these figures are older.";
    }
    setTimeout(refresh, seconds * 1000);
  }

  setTimeout(refresh, seconds * 1000);
})();
