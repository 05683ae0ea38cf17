/**
 * The JavaScript that runs inside every fresh QuickJS context before the script.
 *
 * It evaluates to `{ run, collect }`, kept by the host as handles and never reachable
 * from the script. It installs `console` (collecting lines, nothing reaches the host),
 * `module` / `exports` (for CommonJS-style scripts), builds `this` from JSON with the
 * SynthDev helpers (contexts with `addMessage`, `this.context.getContext(name)`, the
 * script's own functions as methods) and turns the outcome back into one JSON string.
 *
 * Invariant: nothing but strings crosses the boundary. `run(name, thisJson, argsJson)`
 * takes strings and returns a JSON string (or null while an async handler is pending,
 * then `collect()` returns the string). The intrinsics it relies on are captured before
 * the script runs, so a script that replaces `JSON` or `Object.keys` only breaks itself.
 */
export const PRELUDE = String.raw`(function () {
  "use strict";
  var G = globalThis;
  var jsonParse = JSON.parse, jsonStringify = JSON.stringify;
  var getProto = Object.getPrototypeOf, defineProp = Object.defineProperty, ownNames = Object.getOwnPropertyNames;
  var keysOf = Object.keys, hasOwn = Object.hasOwn, isArray = Array.isArray, ObjectProto = Object.prototype;
  var indirectEval = G.eval, promiseResolve = Promise.resolve.bind(Promise), TypeErr = TypeError, Err = Error;
  var MAX_DEPTH = 200, MAX_LOGS = 200, MAX_LOG_CHARS = 65536;

  function hidden(obj, name, value) {
    defineProp(obj, name, { value: value, writable: true, configurable: true, enumerable: false });
  }
  function fmt(v) {
    if (typeof v === "string") return v;
    try { var s = jsonStringify(v); return s === undefined ? String(v) : s; } catch (e) {
      try { return String(v); } catch (e2) { return "[unprintable]"; }
    }
  }

  var logs = [], logChars = 0, logsDropped = 0;
  function logger(level) {
    return function () {
      var parts = [];
      for (var i = 0; i < arguments.length; i++) parts.push(fmt(arguments[i]));
      var line = (level === "log" ? "" : level + ": ") + parts.join(" ");
      if (logs.length >= MAX_LOGS || logChars + line.length > MAX_LOG_CHARS) { logsDropped++; return; }
      logs.push(line);
      logChars += line.length;
    };
  }
  hidden(G, "console", { log: logger("log"), info: logger("info"), warn: logger("warn"), error: logger("error"), debug: logger("debug") });
  var moduleObj = { exports: {} };
  hidden(G, "module", moduleObj);
  hidden(G, "exports", moduleObj.exports);

  var before = new Map();
  ownNames(G).forEach(function (n) { before.set(n, G[n]); });

  function NotJson(path, problem) { this.path = path; this.problem = problem; }
  function childPath(path, key) {
    return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? path + "." + key : path + "[" + jsonStringify(key) + "]";
  }
  function clone(v, path, depth, stack) {
    if (v === null) return null;
    switch (typeof v) {
      case "string": case "boolean": return v;
      case "number": if (v !== v || v === Infinity || v === -Infinity) throw new NotJson(path, "is " + v); return v;
      case "undefined": throw new NotJson(path, "is undefined");
      case "function": throw new NotJson(path, "is a function");
      case "symbol": throw new NotJson(path, "is a symbol");
      case "bigint": throw new NotJson(path, "is a BigInt");
    }
    if (depth > MAX_DEPTH) throw new NotJson(path, "is nested deeper than " + MAX_DEPTH + " levels");
    if (stack.indexOf(v) >= 0) throw new NotJson(path, "is a circular reference");
    if (typeof v.toJSON === "function") return clone(v.toJSON(), path, depth + 1, stack.concat([v]));
    stack.push(v);
    var out, i;
    if (isArray(v)) {
      out = [];
      for (i = 0; i < v.length; i++) out.push(clone(v[i], path + "[" + i + "]", depth + 1, stack));
    } else {
      var proto = getProto(v);
      if (proto !== ObjectProto && proto !== null) {
        var ctor = proto && typeof proto.constructor === "function" ? proto.constructor.name : "";
        throw new NotJson(path, "is " + (ctor ? "a " + ctor : "an object with a custom prototype") + ", not a plain object");
      }
      out = {};
      var ks = keysOf(v);
      for (i = 0; i < ks.length; i++) {
        var val = v[ks[i]];
        if (val === undefined) continue;
        defineProp(out, ks[i], { value: clone(val, childPath(path, ks[i]), depth + 1, stack), writable: true, configurable: true, enumerable: true });
      }
    }
    stack.pop();
    return out;
  }

  function addMessageTo(list, a, b) {
    var msg;
    if (a !== null && typeof a === "object" && !isArray(a)) {
      msg = {};
      keysOf(a).forEach(function (k) { defineProp(msg, k, { value: a[k], writable: true, configurable: true, enumerable: true }); });
    } else {
      msg = { role: a, content: b };
    }
    if (typeof msg.role !== "string" || msg.role === "") throw new TypeErr("addMessage: role must be a non-empty string");
    if (msg.content === undefined) throw new TypeErr("addMessage: content is missing");
    list.push(msg);
    return list.length;
  }
  function decorateContext(name, c) {
    if (c === null || typeof c !== "object" || hasOwn(c, "addMessage")) return c;
    var messages = function () {
      if (isArray(c)) return c;
      if (c.messages === undefined) c.messages = [];
      if (!isArray(c.messages)) throw new TypeErr("context " + jsonStringify(name) + ": messages is not an array");
      return c.messages;
    };
    hidden(c, "addMessage", function (a, b) { return addMessageTo(messages(), a, b); });
    hidden(c, "getMessages", messages);
    return c;
  }
  function findContext(self, name) {
    var cs = self.contexts;
    if (isArray(cs)) {
      for (var i = 0; i < cs.length; i++) if (cs[i] && typeof cs[i] === "object" && cs[i].name === name) return decorateContext(name, cs[i]);
    } else if (cs !== null && typeof cs === "object" && hasOwn(cs, name) && cs[name] !== null && typeof cs[name] === "object") {
      return decorateContext(name, cs[name]);
    }
    var known = isArray(cs) ? cs.map(function (c) { return c && c.name; }) : cs && typeof cs === "object" ? keysOf(cs) : [];
    throw new Err("getContext: no context " + jsonStringify(name) + " in this.contexts (known: " + (known.length ? known.join(", ") : "none") + ")");
  }
  function decorate(self) {
    var cs = self.contexts;
    if (isArray(cs)) cs.forEach(function (c) { if (c && typeof c === "object" && typeof c.name === "string") decorateContext(c.name, c); });
    else if (cs !== null && typeof cs === "object") keysOf(cs).forEach(function (n) { decorateContext(n, cs[n]); });
    var getContext = function (name) { return findContext(self, name); };
    if (self.context === undefined) {
      var manager = {};
      hidden(manager, "getContext", getContext);
      hidden(self, "context", manager);
    } else if (self.context !== null && typeof self.context === "object" && !isArray(self.context) && !hasOwn(self.context, "getContext")) {
      hidden(self.context, "getContext", getContext);
    }
    var add = function (n, f) { if (typeof f === "function" && !hasOwn(self, n)) hidden(self, n, f); };
    ownNames(G).forEach(function (n) { if (!before.has(n) || before.get(n) !== G[n]) add(n, G[n]); });
    var m = moduleObj.exports;
    if (m !== null && typeof m === "object") keysOf(m).forEach(function (n) { add(n, m[n]); });
  }

  function resolve(name) {
    var m = moduleObj.exports;
    if (m !== null && (typeof m === "object" || typeof m === "function")) {
      if (hasOwn(m, name) && typeof m[name] === "function") return m[name];
      var d = m.default;
      if (d !== null && typeof d === "object" && hasOwn(d, name) && typeof d[name] === "function") return d[name];
    }
    var f;
    try { f = indirectEval("typeof " + name + " === 'function' ? " + name + " : undefined"); } catch (e) { f = undefined; }
    if (typeof f !== "function") return undefined;
    if (before.has(name) && before.get(name) === f) return undefined;
    return f;
  }

  function threw(e) {
    var name = "Error", message = "", stack = "";
    try {
      if (e !== null && typeof e === "object") {
        name = String(e.name);
        message = String(e.message);
        stack = typeof e.stack === "string" ? e.stack : "";
      } else {
        name = "thrown value";
        message = fmt(e);
      }
    } catch (e2) { message = "[unprintable thrown value]"; }
    return jsonStringify({ s: "threw", name: name, message: message, stack: stack, logs: logs, logsDropped: logsDropped });
  }
  function finish(self, ret) {
    try {
      var t = clone(self, "this", 0, []);
      var r = ret === undefined ? null : clone(ret, "returned", 0, []);
      return jsonStringify({ s: "ok", this: t, returned: r, logs: logs, logsDropped: logsDropped });
    } catch (e) {
      if (e instanceof NotJson) return jsonStringify({ s: "notjson", path: e.path, problem: e.problem, logs: logs, logsDropped: logsDropped });
      return threw(e);
    }
  }

  var outcome = null;
  function run(name, thisJson, argsJson) {
    var fn = resolve(name);
    if (fn === undefined) return jsonStringify({ s: "missing", logs: logs, logsDropped: logsDropped });
    var self = jsonParse(thisJson), args = jsonParse(argsJson), ret;
    decorate(self);
    try { ret = fn.apply(self, args); } catch (e) { return threw(e); }
    var isThenable = false;
    try { isThenable = ret !== null && (typeof ret === "object" || typeof ret === "function") && typeof ret.then === "function"; } catch (e) { return threw(e); }
    if (!isThenable) return finish(self, ret);
    promiseResolve(ret).then(function (v) { outcome = finish(self, v); }, function (e) { outcome = threw(e); });
    return null;
  }
  function collect() {
    return outcome !== null ? outcome : jsonStringify({ s: "pending", logs: logs, logsDropped: logsDropped });
  }
  return { run: run, collect: collect };
})()`;
