// The review page's only script (its Content-Security-Policy allows no other). Every write is a JSON POST with the
// page's CSRF token; a 409 means another grader changed the answer or the item first: the banner says what, and the
// page shows what is stored now.
"use strict";

const csrf = () => document.querySelector('meta[name="csrf"]').content;

async function post(url, data) {
  const response = await fetch(url, {
    method: "POST", credentials: "same-origin",
    headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf()},
    body: JSON.stringify(data),
  });
  let body = {};
  try { body = await response.json(); } catch (e) { body = {error: "the server answered " + response.status}; }
  return {status: response.status, body: body};
}

function banner(text, kind) {
  const el = document.getElementById("banner");
  el.textContent = text;
  el.className = "banner " + (kind || "error");
  el.hidden = false;
}

function showGrade(grade) {
  const panel = document.getElementById("grading");
  panel.dataset.version = grade.version;
  document.getElementById("score").textContent = grade.graded ? String(grade.score) : "ungraded";
  for (const li of document.querySelectorAll("#items .item")) {
    li.classList.toggle("applied", grade.applied.includes(Number(li.dataset.id)));
  }
  const comment = document.getElementById("comment");
  if (document.activeElement !== comment) comment.value = grade.comment;
  document.getElementById("override").value = grade.override === null ? "" : String(grade.override);
}

async function gradeChange(change) {
  const panel = document.getElementById("grading");
  const data = Object.assign({q: Number(panel.dataset.q), s: Number(panel.dataset.s),
                              version: Number(panel.dataset.version)}, change);
  const {status, body} = await post("/api/grade", data);
  if (status === 200) { showGrade(body.grade); document.getElementById("banner").hidden = true; return; }
  banner(body.error || "not saved");
  if (status === 409 && body.current) showGrade(body.current);
}

function toggleItem(li) { return gradeChange({toggle: Number(li.dataset.id)}); }

function editForm(li) {
  const form = document.getElementById("item-form");
  form.hidden = false;
  form.elements.id.value = li ? li.dataset.id : "";
  form.elements.version.value = li ? li.dataset.version : "";
  form.elements.title.value = li ? li.querySelector(".item-title").textContent : "";
  form.elements.points.value = li ? Number(li.querySelector(".item-points").textContent) : "";
  form.elements.comment.value = li ? li.querySelector(".item-comment").textContent : "";
  form.elements.title.focus();
}

async function saveItem(event) {
  event.preventDefault();
  const form = event.target;
  const panel = document.getElementById("grading");
  const data = {q: Number(panel.dataset.q), title: form.elements.title.value,
                points: Number(form.elements.points.value), comment: form.elements.comment.value};
  if (form.elements.id.value) { data.id = Number(form.elements.id.value); data.version = Number(form.elements.version.value); }
  const {status, body} = await post("/api/item", data);
  if (status === 200) { location.reload(); return; }
  banner((body.error || "not saved") + (status === 409 ? " (reload to see the item as it is now)" : ""));
}

function onKey(event) {
  const target = event.target;
  if (target.closest && target.closest("input, textarea, select")) {
    if (event.key === "Escape") target.blur();
    return;
  }
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  const go = (id) => { const a = document.getElementById(id); if (a) location.href = a.href; };
  if (event.key === "j" || event.key === "ArrowRight") go("next");
  else if (event.key === "k" || event.key === "ArrowLeft") go("prev");
  else if (event.key === "c") { event.preventDefault(); const c = document.getElementById("comment"); if (c) c.focus(); }
  else if (event.key === "u") {
    const url = new URL(location.href);
    if (url.searchParams.get("ungraded") === "1") url.searchParams.delete("ungraded"); else url.searchParams.set("ungraded", "1");
    location.href = url.toString();
  } else if (/^[1-9]$/.test(event.key)) {
    const li = document.querySelectorAll("#items .item")[Number(event.key) - 1];
    if (li) toggleItem(li);
  }
}

function setUp() {
  document.addEventListener("keydown", onKey);
  for (const li of document.querySelectorAll("#items .item")) {
    li.querySelector(".apply").addEventListener("click", () => toggleItem(li));
    li.querySelector(".edit").addEventListener("click", () => editForm(li));
  }
  const on = (id, what, fn) => { const el = document.getElementById(id); if (el) el.addEventListener(what, fn); };
  on("add-item", "click", () => editForm(null));
  on("item-cancel", "click", () => { document.getElementById("item-form").hidden = true; });
  on("item-form", "submit", saveItem);
  on("save", "click", () => {
    const value = document.getElementById("override").value;
    gradeChange({comment: document.getElementById("comment").value, override: value === "" ? null : Number(value)});
  });
  on("merge", "click", async () => {
    const {status, body} = await post("/api/merge", {});
    document.getElementById("merge-result").textContent =
      status === 200 ? body.merged + " submission(s) written into the results" : (body.error || "not written");
  });
}

document.addEventListener("DOMContentLoaded", setUp);
