// The one DOM helper the modules share: text goes in through textContent, never as markup.

/** A new element with an optional class and text. */
export function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}
