() => {
  const W = window.innerWidth, H = window.innerHeight;
  const TAGS = new Set(['A', 'BUTTON', 'INPUT', 'TEXTAREA', 'SELECT', 'LABEL']);
  const ROLES = new Set(['button', 'link', 'tab', 'checkbox', 'radio', 'menuitem', 'option', 'treeitem']);
  const LEAVES = new Set(['SPAN', 'DIV', 'TD', 'TH', 'LI', 'P', 'H1', 'H2', 'H3', 'H4', 'H5', 'H6', 'B', 'STRONG',
                          'EM', 'I', 'SMALL', 'DT', 'DD', 'CAPTION', 'LEGEND', 'PRE', 'CODE', 'FONT', 'CENTER']);
  const CONTROL = 'a,button,input,textarea,select,label,[role=button],[role=link],[role=tab],[role=checkbox],' +
                  '[role=radio],[role=menuitem],[role=option],[role=treeitem],[onclick]';
  const squash = (s) => (s || '').replace(/\s+/g, ' ').trim().slice(0, 200);
  const active = document.activeElement;
  const out = [];
  for (const el of document.body ? document.body.querySelectorAll('*') : []) {
    const tag = el.tagName;
    const role = (el.getAttribute('role') || '').toLowerCase();
    let kind = null, own = '';
    if (TAGS.has(tag) || ROLES.has(role) || el.hasAttribute('onclick') || typeof el.onclick === 'function') {
      if (tag === 'INPUT' && el.type === 'hidden') continue;
      kind = 'control';
    } else if (LEAVES.has(tag)) {
      for (const n of el.childNodes) if (n.nodeType === 3) own += n.nodeValue;
      own = squash(own);
      // a text leaf inside a control is part of that control's text already
      if (own && !(el.parentElement && el.parentElement.closest(CONTROL))) kind = 'text';
    }
    if (!kind) continue;
    const r = el.getBoundingClientRect();
    const x1 = Math.max(0, Math.floor(r.left)), y1 = Math.max(0, Math.floor(r.top));
    const x2 = Math.min(W, Math.ceil(r.right)), y2 = Math.min(H, Math.ceil(r.bottom));
    if (x2 <= x1 || y2 <= y1) continue;  // empty, or outside the viewport
    if (el.checkVisibility ? !el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true})
                           : getComputedStyle(el).visibility === 'hidden') continue;
    const e = {id: out.length, tag: tag.toLowerCase(), role: role, text: '', box: [x1, y1, x2, y2]};
    if (kind === 'text') e.text = own;
    else if (tag === 'SELECT') {
      e.options = Array.from(el.options, (o) => squash(o.text));
      const s = el.options[el.selectedIndex];
      e.selected = s ? squash(s.text) : '';
      e.text = e.selected;
    } else if (tag === 'INPUT' && ['submit', 'button', 'reset'].includes(el.type)) e.text = squash(el.value);
    else if (tag !== 'INPUT' && tag !== 'TEXTAREA') e.text = squash(el.innerText || el.getAttribute('aria-label'));
    if (tag === 'INPUT') e.type = el.type;
    if (el.hasAttribute('name')) e.name = el.getAttribute('name');
    if (tag === 'INPUT' || tag === 'TEXTAREA') {
      if (!['checkbox', 'radio', 'submit', 'button', 'reset', 'file'].includes(el.type))
        e.value = el.type === 'password' ? '*'.repeat(el.value.length) : el.value;
      else if ((el.type === 'checkbox' || el.type === 'radio') && el.hasAttribute('value')) e.value = el.value;
      if (el.placeholder) e.placeholder = el.placeholder;
    }
    if (tag === 'INPUT' && (el.type === 'checkbox' || el.type === 'radio')) e.checked = el.checked;
    else if (role === 'checkbox' || role === 'radio') e.checked = el.getAttribute('aria-checked') === 'true';
    if (tag === 'A' && el.hasAttribute('href')) e.href = el.href;
    if (el.labels && el.labels.length) e.label = squash(el.labels[0].innerText);
    if (el.disabled || el.getAttribute('aria-disabled') === 'true') e.disabled = true;
    if (el === active) e.focused = true;
    out.push(e);
  }
  return out;
}
