// Forms that cannot be undone ask first: <form data-confirm="question">. Without script they
// simply post (the page stays usable).
for (const form of document.querySelectorAll("form[data-confirm]")) {
  form.addEventListener("submit", (ev) => {
    if (!window.confirm(form.dataset.confirm)) ev.preventDefault();
  });
}
