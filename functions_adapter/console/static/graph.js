// A workflow's graph (`GET /api/workflows/{name}`: executors and edges), drawn in layers by
// distance from the start executor. Edges that go back up (loops) curve round the right.

import { svg } from "./dom.js";

const BOX_W = 150;
const BOX_H = 42;
const GAP_X = 30;
const GAP_Y = 46;
const PAD = 12;

export function drawGraph(graph) {
  const ids = graph.executors.map((e) => e.id);
  const depth = new Map([[graph.start, 0]]);
  const queue = [graph.start];
  while (queue.length) {
    const id = queue.shift();
    for (const edge of graph.edges) {
      if (edge.source === id && !depth.has(edge.target)) {
        depth.set(edge.target, depth.get(id) + 1);
        queue.push(edge.target);
      }
    }
  }
  let deepest = Math.max(0, ...depth.values());
  for (const id of ids) if (!depth.has(id)) depth.set(id, ++deepest);
  const layers = [];
  for (const id of ids) (layers[depth.get(id)] ||= []).push(id);
  const place = new Map();
  const widest = Math.max(1, ...layers.filter(Boolean).map((layer) => layer.length));
  const width = PAD * 2 + widest * BOX_W + (widest - 1) * GAP_X + 40;
  layers.forEach((layer, level) => {
    if (!layer) return;
    const span = layer.length * BOX_W + (layer.length - 1) * GAP_X;
    const start = (width - 40 - span) / 2;
    layer.forEach((id, index) => place.set(id, { x: start + index * (BOX_W + GAP_X), y: PAD + level * (BOX_H + GAP_Y) }));
  });
  const height = PAD * 2 + layers.length * BOX_H + Math.max(layers.length - 1, 0) * GAP_Y;

  const defs = svg(
    "defs",
    {},
    svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
      svg("path", { d: "M 0 0 L 10 5 L 0 10 z" })),
  );
  const edges = svg("g", { class: "edges" });
  for (const edge of graph.edges) {
    const from = place.get(edge.source);
    const to = place.get(edge.target);
    if (!from || !to) continue;
    let d;
    if (to.y > from.y) {
      d = `M ${from.x + BOX_W / 2} ${from.y + BOX_H} L ${to.x + BOX_W / 2} ${to.y}`;
    } else {
      const right = Math.max(from.x, to.x) + BOX_W;
      d = `M ${from.x + BOX_W} ${from.y + BOX_H / 2} C ${right + 36} ${from.y + BOX_H / 2}, ${right + 36} ${to.y + BOX_H / 2}, ${to.x + BOX_W} ${to.y + BOX_H / 2}`;
    }
    edges.append(svg("path", { d, class: "edge", "marker-end": "url(#arrow)" }, svg("title", {}, edge.kind || "")));
  }
  const nodes = svg("g", { class: "nodes" });
  const types = new Map(graph.executors.map((e) => [e.id, e.type]));
  for (const id of ids) {
    const at = place.get(id);
    nodes.append(
      svg(
        "g",
        { class: id === graph.start ? "node start" : "node", dataset: { executorId: id } },
        svg("rect", { x: at.x, y: at.y, width: BOX_W, height: BOX_H, rx: 6 }),
        svg("text", { x: at.x + BOX_W / 2, y: at.y + 18, class: "id" }, id),
        svg("text", { x: at.x + BOX_W / 2, y: at.y + 33, class: "type" }, types.get(id) || ""),
      ),
    );
  }
  return svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "Workflow graph" }, defs, edges, nodes);
}
