([x, y]) => {
  let el = document.elementFromPoint(x, y);
  if (!el) return "";
  const hit = el.closest('a,button,input,textarea,select,label,summary,[role],[onclick]') || el;
  if (hit === document.documentElement || hit === document.body) return "";  // nothing in particular
  const text = (hit.getAttribute('aria-label') || hit.innerText || hit.value || hit.getAttribute('placeholder')
                || hit.getAttribute('title') || hit.getAttribute('alt') || '').replace(/\s+/g, ' ').trim();
  const tag = hit.tagName.toLowerCase() + (hit.type && hit.tagName === 'INPUT' ? '[' + hit.type + ']' : '');
  return '<' + tag + '>' + (text ? " '" + (text.length > 40 ? text.slice(0, 37) + "...'" : text + "'") : '');
}
