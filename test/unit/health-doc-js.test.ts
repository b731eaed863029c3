import { describe, expect, it } from "vitest";
import { jsDocSymbols, libMemberDocs } from "../../src/health/doc-js.js";

const names = (file: string, text: string) =>
  jsDocSymbols(file, text).map((s) => `${s.documented ? "+" : "-"}${s.name}`);

describe("jsDocSymbols: which symbols are public API and documented", () => {
  it("counts an alias chain as one symbol under its first name", () => {
    const text = [
      "var res = module.exports = {};",
      "/** Set the Content-Type. */",
      "res.contentType = res.type = function contentType(type) {};",
      "res.plain = function plain() {};",
      "exports.json = bodyParser.json;",
    ].join("\n");
    expect(names("lib/response.js", text)).toEqual(["+res.contentType", "-res.plain"]);
  });

  it("counts class fields only when their value is a function", () => {
    const text = [
      "/** A thing. */",
      "export class Thing {",
      "  size: number = 0;",
      "  label = 'x';",
      "  /** Runs. */",
      "  run = () => 1;",
      "  stop = function () {};",
      "}",
    ].join("\n");
    expect(names("src/thing.ts", text)).toEqual(["+Thing", "+Thing.run", "-Thing.stop"]);
  });

  it("documents members that implement or override a documented member in the same file", () => {
    const text = [
      "interface Shape {",
      "  /** The area. */",
      "  area(): number;",
      "  name(): string;",
      "}",
      "/** A base. */",
      "export class Base {",
      "  /** Draws. */",
      "  draw() {}",
      "}",
      "/** A square. */",
      "export class Square extends Base implements Shape {",
      "  area() { return 1; }",
      "  name() { return 'square'; }",
      "  draw() {}",
      "  extra() {}",
      "}",
    ].join("\n");
    expect(names("src/shape.ts", text)).toEqual([
      "+Base",
      "+Base.draw",
      "+Square",
      "+Square.area",
      "-Square.name",
      "+Square.draw",
      "-Square.extra",
    ]);
  });

  it("documents members of a standard library interface it implements, unless the name is imported", () => {
    // lib.dom.d.ts documents URL's `href` and `origin`.
    expect(libMemberDocs("URL")).toEqual(
      expect.arrayContaining([
        ["href", true],
        ["origin", true],
      ]),
    );
    const cls = [
      "/** A URL. */",
      "export class MyURL implements URL {",
      "  get href(): string { return ''; }",
      "  get fullpath(): string { return ''; }",
      "}",
    ].join("\n");
    expect(names("src/url.ts", cls)).toEqual(["+MyURL", "+MyURL.href", "-MyURL.fullpath"]);
    // An imported URL is not the global one, and its file is not read here.
    expect(names("src/url.ts", `import { URL } from "./other";\n${cls}`)).toEqual([
      "+MyURL",
      "-MyURL.href",
      "-MyURL.fullpath",
    ]);
  });
});
