// The checkpoint lineage as a tree, newest on top, like `git log --graph`: the head's line in
// the first column, each branch a fork replaced (or a fork's own older line) in a column of
// its own, every edge a parent link (`previous_checkpoint_id`).

import { svg, shortId, when } from "./dom.js";

const ROW = 30;
const COLUMN = 22;
const LEFT = 14;
const TOP = 16;
const CHAR_W = 7.3; // 12px monospace
const LABEL_WORDS = 30;

/**
 * `nodes`: Map of checkpoint ID → history entry (`checkpoint_id`, `previous_checkpoint_id`,
 * `timestamp`, `status`, optional `turn`). Returns the SVG; `onSelect(id)` on a click.
 */
export function drawLineage(nodes, headId, selectedId, onSelect) {
  const ordered = [...nodes.values()].sort((a, b) => String(b.timestamp).localeCompare(String(a.timestamp)));
  const column = new Map();
  for (let id = headId; id && nodes.has(id) && !column.has(id); id = nodes.get(id).previous_checkpoint_id) {
    column.set(id, 0);
  }
  let next = 1;
  for (const entry of ordered) {
    if (column.has(entry.checkpoint_id)) continue;
    const branch = next++;
    for (let id = entry.checkpoint_id; id && nodes.has(id) && !column.has(id); id = nodes.get(id).previous_checkpoint_id) {
      column.set(id, branch);
    }
  }
  const row = new Map(ordered.map((entry, index) => [entry.checkpoint_id, index]));
  const x = (id) => LEFT + column.get(id) * COLUMN;
  const y = (id) => TOP + row.get(id) * ROW;
  const labelX = LEFT + Math.max(next, 1) * COLUMN + 6;
  const labels = new Map(ordered.map((entry) => [entry.checkpoint_id, label(entry, headId)]));
  const longest = Math.max(20, ...[...labels.values()].map((text) => text.length));
  const width = labelX + Math.ceil(longest * CHAR_W) + 8; // every label whole: no box to scroll
  const height = TOP * 2 + Math.max(ordered.length - 1, 0) * ROW;

  const edges = svg("g", { class: "edges" });
  for (const entry of ordered) {
    const parent = entry.previous_checkpoint_id;
    const id = entry.checkpoint_id;
    if (parent && nodes.has(parent)) {
      const [x1, y1, x2, y2] = [x(id), y(id), x(parent), y(parent)];
      const bend = x1 === x2 ? "" : ` L ${x1} ${y2 - ROW / 2} `;
      edges.append(svg("path", { d: `M ${x1} ${y1}${bend}L ${x2} ${y2}`, class: column.get(id) ? "edge branch" : "edge" }));
    } else if (parent) {
      edges.append(svg("path", { d: `M ${x(id)} ${y(id)} L ${x(id)} ${y(id) + ROW / 2}`, class: "edge older" }));
    }
  }

  const points = svg("g", { class: "nodes" });
  for (const entry of ordered) {
    const id = entry.checkpoint_id;
    const classes = ["node"];
    if (id === headId) classes.push("head");
    if (column.get(id) !== 0) classes.push("branch");
    if (id === selectedId) classes.push("selected");
    if (entry.status === "pending_requests") classes.push("pending");
    const group = svg(
      "g",
      { class: classes.join(" "), dataset: { checkpointId: id }, tabindex: 0, role: "button" },
      svg("title", {}, `${id}\n${when(entry.timestamp)}\nstatus: ${entry.status}${entry.turn && entry.turn.edited ? "\nran from edited state" : ""}`),
      svg("circle", { cx: x(id), cy: y(id), r: id === headId ? 7 : 5 }),
      svg("text", { x: labelX, y: y(id) + 4 }, labels.get(id)),
    );
    group.addEventListener("click", () => onSelect(id));
    group.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") onSelect(id);
    });
    points.append(group);
  }
  return svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "Checkpoint lineage" }, edges, points);
}

/** A node's label: its short ID, HEAD, "edited" for a turn run from edited state, and the
 * turn's first words. */
function label(entry, headId) {
  const id = entry.checkpoint_id;
  const first = entry.turn && entry.turn.in && entry.turn.in.find((m) => m.role === "user");
  const words = first ? first.content : entry.turn && entry.turn.in && !entry.turn.in.length ? "(answer or continue)" : "";
  const edited = entry.turn && entry.turn.edited ? " edited" : "";
  return `${shortId(id)}${id === headId ? " HEAD" : ""}${edited}  ${clip(words, LABEL_WORDS)}`;
}

function clip(text, length) {
  const flat = String(text || "").replace(/\s+/g, " ");
  return flat.length > length ? `${flat.slice(0, length - 1)}…` : flat;
}
