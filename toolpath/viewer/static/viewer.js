// The steps of a run, drawn from JSON a page at a time. Model output is untrusted: every value goes into the
// page as a text node (textContent), never as HTML, and an image's address is built only from a well-formed
// SHA-256 (the server serves only digests listed in the store's artifacts table).
(function () {
  "use strict";
  const box = document.getElementById("steps");
  if (!box) return;
  const api = box.dataset.api, agent = box.dataset.agent || "";
  const pageSize = parseInt(box.dataset.pageSize, 10) || 50;
  const button = document.getElementById("load-more"), spinner = document.getElementById("loading");
  const counter = document.getElementById("step-count");
  const SHA = /^[0-9a-f]{64}$/;
  let next = null, total = 0, shown = 0, busy = false;

  function el(tag, cls, text) {
    const n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined && text !== null) n.textContent = String(text);
    return n;
  }
  function pretty(v) { return typeof v === "string" ? v : JSON.stringify(v, null, 2); }
  function num(v, digits) { return typeof v === "number" ? v.toPrecision(digits || 3) : ""; }
  function details(title, value, open, cls) {
    const d = el("details", cls || "extra");
    if (open) d.open = true;
    d.appendChild(el("summary", null, title));
    d.appendChild(el("pre", null, pretty(value)));
    return d;
  }

  // What an image of this agent's step is: the brief's "rendered views", "drawn traces", "screens".
  function caption(node, name) {
    name = name || "";
    if (agent === "visual_program" && node === "tools") return "rendered view";
    if (agent === "embodied") {
      if (/^trace_/.test(name) || node === "reason") return "drawn trace";
      if (/^depth_/.test(name)) return "depth";
      if (node === "check" || /final/.test(name)) return "final camera";
      return "camera";
    }
    if (agent === "computer_use") return /final/.test(name) ? "final screen" : "screen";
    if (agent === "fast_slow" && node === "tools") return "edited image";
    return "image";
  }

  // `route` serves the picture of an artifact (default: the artifact itself); `label` overrides its caption.
  function images(refs, node, route, label) {
    const fig = el("div", "images");
    for (const ref of refs) {
      if (!ref || !SHA.test(ref.sha256 || "")) continue;
      const f = el("figure", "artifact");
      const a = el("a");
      a.href = "/artifacts/" + ref.sha256;
      a.target = "_blank";
      a.rel = "noopener";
      const img = el("img");
      img.src = (route || "/artifacts/") + ref.sha256;
      img.alt = ref.name || ref.sha256.slice(0, 12);
      img.loading = "lazy";
      img.decoding = "async";
      img.addEventListener("load", () => {  // a 10-pixel crop is drawn big enough to see, its pixels kept sharp
        if (img.naturalWidth && img.naturalWidth < 64) {
          img.style.width = img.naturalWidth * 4 + "px";
          img.style.imageRendering = "pixelated";
        }
      });
      a.appendChild(img);
      f.appendChild(a);
      f.appendChild(el("figcaption", null, (label || caption(node, ref.name)) + (ref.name ? ": " + ref.name : "")));
      fig.appendChild(f);
    }
    return fig;
  }

  // Audio artifacts (a task's inputs.audio, a tool's audio output) get a player, their name under it.
  function players(refs) {
    const box = el("div", "audio");
    for (const ref of refs) {
      if (!ref || !SHA.test(ref.sha256 || "")) continue;
      const f = el("figure", "artifact");
      const audio = el("audio");
      audio.controls = true;
      audio.preload = "metadata";
      audio.src = "/artifacts/" + ref.sha256;
      f.appendChild(audio);
      f.appendChild(el("figcaption", null, "audio" + (ref.name ? ": " + ref.name : "")));
      box.appendChild(f);
    }
    return box;
  }

  // Molecule artifacts (a task's inputs.graphs, as MOL blocks) are drawn by the server (/depictions/, RDKit);
  // the picture links to the MOL file.
  function molecules(refs) { return images(refs, null, "/depictions/", "molecule"); }

  function toolCalls(calls) {
    const ul = el("ul", "calls");
    for (const c of calls) {
      const li = el("li", "call");
      li.appendChild(el("span", "label", "call "));
      li.appendChild(el("code", "call-name", c.name));
      if (c.id) li.appendChild(el("span", "call-id", " (" + c.id + ")"));
      // JSON strings escape their newlines, so collapsing the layout's newlines changes no argument's text
      const line = JSON.stringify(c.arguments || {}, null, 1).replace(/\n\s*/g, " ");
      li.appendChild(el("pre", "args", line.length <= 100 ? line : JSON.stringify(c.arguments || {}, null, 2)));
      ul.appendChild(li);
    }
    return ul;
  }

  function message(m, node, seen) {
    const div = el("div", "msg role-" + (m.role || "unknown"));
    div.appendChild(el("span", "role", (m.role || "?") + (m.name ? " · " + m.name : "") +
      (m.tool_call_id ? " · reply to " + m.tool_call_id : "")));
    if (m.content) div.appendChild(el("pre", "content", m.content));
    if (m.tool_calls && m.tool_calls.length) div.appendChild(toolCalls(m.tool_calls));
    const imgs = (m.images || []).filter(r => r && !seen.has(r.sha256) && seen.add(r.sha256));
    if (imgs.length) div.appendChild(images(imgs, node));
    const sounds = (m.audio || []).filter(r => r && !seen.has(r.sha256) && seen.add(r.sha256));
    if (sounds.length) div.appendChild(players(sounds));
    const mols = (m.graphs || []).filter(r => r && !seen.has(r.sha256) && seen.add(r.sha256));
    if (mols.length) div.appendChild(molecules(mols));
    return div;
  }

  function observation(o, node, seen, more) {
    const div = el("div", "obs" + (o.error ? " error" : ""));
    div.appendChild(el("span", "label", "observation from " + (o.tool || "?") + (o.call_id ? " (" + o.call_id + ")" : "")));
    if (o.error) div.appendChild(el("span", "badge error", "error"));
    div.appendChild(el("pre", "content", o.content || ""));
    const arts = (o.artifacts || []).concat(more || []).filter(r => r && !seen.has(r.sha256) && seen.add(r.sha256));
    const imgs = arts.filter(r => (r.mime || "").startsWith("image/"));
    if (imgs.length) div.appendChild(images(imgs, node));
    const sounds = arts.filter(r => (r.mime || "").startsWith("audio/"));
    if (sounds.length) div.appendChild(players(sounds));
    const mols = arts.filter(r => (r.mime || "") === "chemical/x-mdl-molfile");
    if (mols.length) div.appendChild(molecules(mols));
    for (const r of arts.filter(r => !/^(image|audio)\//.test(r.mime || "") && !mols.includes(r))) {
      if (!SHA.test(r.sha256 || "")) continue;
      const a = el("a", "file", "file: " + (r.name || r.sha256.slice(0, 12)) + " (" + (r.mime || "") + ")");
      a.href = "/artifacts/" + r.sha256;
      div.appendChild(a);
    }
    return div;
  }

  // FaSTA*'s A* search, as planners/astar.py records it: rows {id, parent, tool, stage, status, g, f, quality…}.
  function searchTree(rows) {
    const wrap = el("div", "search-tree");
    wrap.appendChild(el("h4", null, "A* search tree (" + rows.length + " nodes)"));
    const kids = new Map(), byId = new Map(), onPath = new Set();
    for (const r of rows) {
      byId.set(r.id, r);
      const k = r.parent === null || r.parent === undefined ? "root" : r.parent;
      if (!kids.has(k)) kids.set(k, []);
      kids.get(k).push(r);
    }
    for (const r of rows) {
      if (r.status !== "goal") continue;
      for (let n = r, guard = 0; n && guard < rows.length + 1; n = byId.get(n.parent), guard++) onPath.add(n.id);
    }
    function item(r, depth) {
      const li = el("li", "tnode status-" + (r.status || "none") + (onPath.has(r.id) ? " on-path" : ""));
      const line = el("span", "tline");
      line.appendChild(el("b", "ttool", r.tool || "start"));
      if (r.stage) line.appendChild(el("span", "tstage", " (" + r.stage + ")"));
      line.appendChild(el("span", "tstatus", " " + (r.status || "")));
      const facts = [];
      if (typeof r.quality === "number") facts.push("q " + num(r.quality));
      if (typeof r.path_quality === "number") facts.push("path q " + num(r.path_quality));
      if (typeof r.g === "number") facts.push("g " + num(r.g));
      if (typeof r.f === "number") facts.push("f " + num(r.f));
      if (typeof r.seconds === "number") facts.push(num(r.seconds, 2) + " s");
      if (facts.length) line.appendChild(el("span", "tfacts", " · " + facts.join(" · ")));
      li.appendChild(line);
      if (r.error) li.appendChild(el("div", "terror error", r.error));
      const children = kids.get(r.id) || [];
      if (children.length && depth < 64) {
        const ul = el("ul");
        for (const c of children) ul.appendChild(item(c, depth + 1));
        li.appendChild(ul);
      }
      return li;
    }
    const ul = el("ul", "tree");
    for (const r of kids.get("root") || []) ul.appendChild(item(r, 0));
    wrap.appendChild(ul);
    return wrap;
  }

  function chain(items) {
    const ol = el("ol", "chain");
    for (const s of items) {
      const t = s.target ? " " + (s.target.name || JSON.stringify(s.target)) : "";
      ol.appendChild(el("li", null, (s.id || "") + " " + (s.kind || "") + t + " " + JSON.stringify(s.params || {})));
    }
    return ol;
  }

  function facts(title, obj, cls) {
    const wrap = el("div", cls);
    wrap.appendChild(el("h4", null, title));
    const dl = el("dl", "kv");
    for (const [k, v] of Object.entries(obj || {})) {
      dl.appendChild(el("dt", null, k));
      dl.appendChild(el("dd", null, typeof v === "object" && v !== null ? JSON.stringify(v) : String(v)));
    }
    wrap.appendChild(dl);
    return wrap;
  }

  const SHOWN = new Set(["messages", "raw", "issues", "observations", "error", "search_tree", "chain", "plan",
    "final_state"]);

  function step(s) {
    const p = (s.payload && typeof s.payload === "object") ? s.payload : {messages: [], text: s.payload};
    const sec = el("section", "step node-" + s.node);
    sec.id = "step-" + s.seq;
    sec.dataset.seq = s.seq;
    const h = el("h3");
    h.appendChild(el("span", "seq", "#" + s.seq + " "));
    h.appendChild(el("span", "node", s.node));
    const meta = [];
    if (typeof s.seconds === "number") meta.push(s.seconds < 1 ? (s.seconds * 1000).toFixed(0) + " ms" : s.seconds.toFixed(2) + " s");
    if (s.tokens_in || s.tokens_out) meta.push("tokens " + s.tokens_in + " in / " + s.tokens_out + " out");
    if (meta.length) h.appendChild(el("span", "meta", " · " + meta.join(" · ")));
    sec.appendChild(h);
    const seen = new Set();
    if (p.error) sec.appendChild(el("p", "error step-error", "error: " + pretty(p.error)));
    if (p.chain && p.chain.length) sec.appendChild(chain(p.chain));
    // A tool message that says what an observation below says is drawn once, as the observation (with its images).
    const observed = new Set((p.observations || []).map(o => o.content));
    const folded = new Map();
    for (const m of p.messages || []) {
      if (m.role === "tool" && observed.has(m.content)) {
        folded.set(m.content, (folded.get(m.content) || []).concat(m.images || []));
        continue;
      }
      sec.appendChild(message(m, s.node, seen));
    }
    if (typeof p.raw === "string" && p.raw !== "") {
      // Open when it says more than the message drawn above (tags, a grammar's wrapping); folded when the same.
      const said = (p.messages || []).filter(m => m.role === "assistant").map(m => m.content || "").join("\n");
      const same = said.trim() === p.raw.trim();
      sec.appendChild(details(same ? "policy output (raw, as the message above)" : "policy output (raw)", p.raw, !same, "raw"));
    }
    if (p.issues && p.issues.length) {
      const ul = el("ul", "issues error");
      for (const i of p.issues) ul.appendChild(el("li", null, pretty(i)));
      sec.appendChild(ul);
    }
    for (const o of p.observations || []) sec.appendChild(observation(o, s.node, seen, folded.get(o.content) || []));
    if (Array.isArray(p.search_tree) && p.search_tree.length) sec.appendChild(searchTree(p.search_tree));
    if (p.plan && typeof p.plan === "object") sec.appendChild(facts("plan", p.plan, "plan"));
    if (p.final_state && typeof p.final_state === "object") sec.appendChild(facts("final state", p.final_state, "final-state"));
    // Whatever else the node recorded: short values on one line, structures folded.
    const inline = [];
    for (const [k, v] of Object.entries(p)) {
      if (SHOWN.has(k) || v === null || v === undefined || (Array.isArray(v) && !v.length)) continue;
      const short = typeof v === "number" || typeof v === "boolean" || (typeof v === "string" && v.length <= 120);
      if (short) inline.push(k + ": " + (typeof v === "number" ? num(v, 4) : String(v)));
      else sec.appendChild(details(k, v, false));
    }
    if (inline.length) sec.appendChild(el("p", "extras", inline.join(" · ")));
    return sec;
  }

  function render(page) {
    const frag = document.createDocumentFragment();
    for (const s of page.steps || []) frag.appendChild(step(s));
    box.appendChild(frag);
    shown += (page.steps || []).length;
    total = page.total;
    next = page.next;
    counter.textContent = "(" + shown + " of " + total + ")";
    button.hidden = next === null || next === undefined;
    if (!total) box.appendChild(el("p", "empty", "this run has no steps stored"));
  }

  async function loadMore() {
    if (busy || next === null || next === undefined) return;
    busy = true;
    spinner.hidden = false;
    button.disabled = true;
    try {
      const res = await fetch(api + "?offset=" + next + "&limit=" + pageSize, {headers: {Accept: "application/json"}});
      const body = await res.json();
      if (!res.ok) throw new Error(body.error || res.statusText);
      render(body);
    } catch (err) {
      spinner.textContent = "could not load more steps: " + err.message;
      spinner.className = "error";
      spinner.hidden = false;
      busy = false;
      button.disabled = false;
      return;
    }
    busy = false;
    spinner.hidden = true;
    button.disabled = false;
  }

  button.addEventListener("click", loadMore);
  const first = document.getElementById("first-page");
  render(JSON.parse(first.textContent));
  document.body.dataset.firstScreen = "ready";  // for tests and the benchmark: the first steps are drawn
  if ("IntersectionObserver" in window) {
    new IntersectionObserver(entries => {
      if (entries.some(e => e.isIntersecting)) loadMore();
    }, {rootMargin: "600px"}).observe(document.getElementById("more"));
  }
})();
