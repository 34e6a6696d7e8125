// httpyac reads this file for every .http file in this folder (the CLI and its VS Code
// extension look for httpyac.config.js next to the file, then upwards); VS Code REST Client
// ignores it.
//
// It teaches httpyac the one piece of REST Client syntax the examples use and httpyac 6
// lacks: request variables, `{{start.response.body.$.checkpoint_id}}` (a JSONPath of dots and
// [n] indexes into a named request's JSON reply) and `{{start.response.headers.Location}}`.
// httpyac keeps a named reply as the variable `start` (its parsed body) and `startResponse`
// (the whole response); this looks the path up there. With it, one requests.http runs
// unchanged in both clients.
const REFERENCE = /^\s*([A-Za-z_$][\w$]*)\.response\.(body\.\$|headers\.)(.*?)\s*$/u;
const STEP = /\.([^.[\]]+)|\[(\d+)\]/gu;

function walk(value, path) {
  let rest = path;
  for (const [whole, key, index] of path.matchAll(STEP)) {
    if (value === undefined || value === null) return undefined;
    value = key === undefined ? value[Number(index)] : value[key];
    rest = rest.slice(whole.length);
  }
  return rest === '' ? value : undefined; // a path this does not understand: leave it alone
}

function lookUp(expression, variables) {
  const match = REFERENCE.exec(expression);
  if (!match) return undefined;
  const [, name, part, path] = match;
  if (part === 'headers.') {
    const headers = (variables[`${name}Response`] || {}).headers || {};
    const wanted = Object.keys(headers).find(header => header.toLowerCase() === path.toLowerCase());
    return wanted === undefined ? undefined : String(headers[wanted]);
  }
  const found = walk(variables[name], path);
  if (found === undefined) return undefined;
  return typeof found === 'string' ? found : JSON.stringify(found);
}

module.exports = {
  configureHooks(api) {
    api.hooks.replaceVariable.addHook(
      'restClientRequestVariables',
      (text, _type, context) =>
        api.utils.parseHandlebarsString(text, async expression => lookUp(expression, context.variables)),
      { before: ['javascript'] }
    );
  },
};
