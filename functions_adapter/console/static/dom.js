// Element builders that only ever set text: no innerHTML anywhere in the console, so a
// message holding markup or script is shown as the characters it is made of.

const SVG_NS = "http://www.w3.org/2000/svg";

function fill(node, attrs, children) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "dataset") {
      for (const [key, item] of Object.entries(value)) if (item !== undefined && item !== null) node.dataset[key] = String(item);
    } else if (name === "onclick" || name === "onsubmit" || name === "oninput") {
      node.addEventListener(name.slice(2), value);
    } else if (/^on/i.test(name) || name === "style") {
      throw new Error(`refused attribute ${name}: handlers are listeners, styles live in console.css`);
    } else {
      node.setAttribute(name, value === true ? "" : String(value));
    }
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** An HTML element: `el("p", {class: "x"}, "text", otherNode)`. */
export function el(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

/** An SVG element, built the same way. */
export function svg(tag, attrs, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

export function $(selector, root = document) {
  return root.querySelector(selector);
}

export function clear(node) {
  node.replaceChildren();
  return node;
}

/** Pretty JSON as text, for a <pre>. */
export function json(value) {
  return JSON.stringify(value, null, 2);
}

export function shortId(id) {
  return id ? String(id).slice(0, 8) : "";
}

export function when(value) {
  if (value === undefined || value === null || value === "") return "";
  const date = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  return Number.isNaN(date.getTime()) ? String(value) : date.toLocaleString();
}
