// Command godoc_symbols lists the exported Go declarations of the files given on stdin
// (a JSON list of {"path", "text"}) and whether each has a doc comment, with go/parser and go/ast as
// `go doc` reads them: funcs, methods on exported types, types, and const/var names (a
// comment on a parenthesised group documents its names). Used by
// src/health/documentation.ts; it parses the files and runs none of their code.
package main

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
)

type symbol struct {
	Path       string `json:"path"`
	Name       string `json:"name"`
	Line       int    `json:"line"`
	Documented bool   `json:"documented"`
}

type failure struct {
	Path  string `json:"path"`
	Error string `json:"error"`
}

func documented(groups ...*ast.CommentGroup) bool {
	for _, g := range groups {
		if g != nil && strings.TrimSpace(g.Text()) != "" {
			return true
		}
	}
	return false
}

func receiverType(expr ast.Expr) string {
	switch t := expr.(type) {
	case *ast.StarExpr:
		return receiverType(t.X)
	case *ast.IndexExpr:
		return receiverType(t.X)
	case *ast.IndexListExpr:
		return receiverType(t.X)
	case *ast.Ident:
		return t.Name
	}
	return ""
}

func main() {
	var files []struct {
		Path string `json:"path"`
		Text string `json:"text"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&files); err != nil {
		os.Exit(2)
	}
	result := struct {
		Symbols []symbol  `json:"symbols"`
		Errors  []failure `json:"errors"`
	}{Symbols: []symbol{}, Errors: []failure{}}
	fset := token.NewFileSet()
	for _, entry := range files {
		path := entry.Path
		file, err := parser.ParseFile(fset, path, entry.Text, parser.ParseComments)
		if err != nil {
			result.Errors = append(result.Errors, failure{path, err.Error()})
			continue
		}
		add := func(name string, pos token.Pos, doc bool) {
			result.Symbols = append(result.Symbols, symbol{path, name, fset.Position(pos).Line, doc})
		}
		for _, decl := range file.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				name := d.Name.Name
				if d.Recv != nil && len(d.Recv.List) > 0 {
					recv := receiverType(d.Recv.List[0].Type)
					if !ast.IsExported(recv) {
						continue
					}
					name = recv + "." + name
				}
				add(name, d.Pos(), documented(d.Doc))
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							add(s.Name.Name, s.Pos(), documented(s.Doc, d.Doc))
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								add(n.Name, n.Pos(), documented(s.Doc, d.Doc))
							}
						}
					}
				}
			}
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(result)
}
