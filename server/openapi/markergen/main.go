// Command markergen reads the Go sources of k8s.io/api and of the k8s.io/apimachinery packages the API types use
// and writes, as Go source, the comment markers that OpenAPI needs and reflection cannot see: +optional and
// +required where they disagree with the json tag, +listType, +listMapKey, +mapType, +structType, +default and
// the values of +enum types. server/openapi's go:generate runs it; its test checks that the output is current.
//
// Usage (from server/openapi):
//
//	go run ./markergen -o zz_generated.markers.go
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// apimachineryPackages are the apimachinery packages whose types appear in k8s.io/api objects.
var apimachineryPackages = []string{"pkg/apis/meta/v1", "pkg/runtime", "pkg/api/resource", "pkg/util/intstr"}

func main() {
	out := flag.String("o", "", "output file (default stdout)")
	flag.Parse()
	src, err := generate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "markergen:", err)
		os.Exit(1)
	}
	if *out == "" {
		_, err = os.Stdout.Write(src)
	} else {
		err = os.WriteFile(*out, src, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "markergen:", err)
		os.Exit(1)
	}
}

// module is a dependency of the current module as `go list -m` reports it.
type module struct{ Path, Version, Dir string }

func generate() ([]byte, error) {
	api, err := listModule("k8s.io/api")
	if err != nil {
		return nil, err
	}
	machinery, err := listModule("k8s.io/apimachinery")
	if err != nil {
		return nil, err
	}
	var pkgs []pkg
	err = filepath.WalkDir(api.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if d.Name() == "testdata" {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(api.Dir, path)
		p, err := parsePackage(path, filepath.ToSlash(filepath.Join(api.Path, rel)))
		if p != nil {
			pkgs = append(pkgs, *p)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, rel := range apimachineryPackages {
		p, err := parsePackage(filepath.Join(machinery.Dir, rel), machinery.Path+"/"+rel)
		if err != nil {
			return nil, err
		}
		if p != nil {
			pkgs = append(pkgs, *p)
		}
	}
	return render(api, machinery, pkgs)
}

func listModule(path string) (module, error) {
	out, err := exec.Command("go", "list", "-m", "-json", path).Output()
	if err != nil {
		return module{}, fmt.Errorf("go list -m %s: %w", path, err)
	}
	var m module
	if err := json.Unmarshal(out, &m); err != nil {
		return module{}, fmt.Errorf("go list -m %s: %w", path, err)
	}
	return m, nil
}

// pkg is what markergen keeps of one package: its struct types' markers and its enum types' values.
type pkg struct {
	path  string
	types map[string]typeInfo // by type name
	enums map[string][]string // enum type name → values
}

type typeInfo struct {
	mapType string
	fields  []fieldInfo
}

type fieldInfo struct {
	json                           string
	required, optional             bool // the marker overrides the json tag's omitempty
	listType, mapType, defaultJSON string
	listMapKeys                    []string
	defaultRef                     string // +default=ref(Const), resolved after the package is read
}

func (f fieldInfo) empty() bool {
	return !f.required && !f.optional && f.listType == "" && f.mapType == "" && f.defaultJSON == "" &&
		len(f.listMapKeys) == 0
}

func parsePackage(dir, path string) (*pkg, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	p := &pkg{path: path, types: map[string]typeInfo{}, enums: map[string][]string{}}
	consts := map[string]any{}         // const name → value
	constsOfType := map[string][]any{} // type name → values
	var enumTypes []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		if f.Name.Name == "main" {
			return nil, nil
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			switch gd.Tok {
			case token.TYPE:
				enumTypes = append(enumTypes, readTypes(p, gd)...)
			case token.CONST:
				readConsts(gd, consts, constsOfType)
			}
		}
	}
	for name, t := range p.types {
		for i, f := range t.fields {
			if f.defaultRef != "" {
				if v, ok := consts[f.defaultRef]; ok {
					b, _ := json.Marshal(v)
					t.fields[i].defaultJSON = string(b)
				}
			}
		}
		p.types[name] = t
	}
	for _, name := range enumTypes {
		var values []string
		for _, v := range constsOfType[name] {
			if s, ok := v.(string); ok && !slices.Contains(values, s) {
				values = append(values, s)
			}
		}
		if len(values) > 0 {
			slices.Sort(values)
			p.enums[name] = values
		}
	}
	return p, nil
}

// readTypes records the struct types of a type declaration and returns the names of its +enum types.
func readTypes(p *pkg, gd *ast.GenDecl) []string {
	var enums []string
	for _, spec := range gd.Specs {
		ts := spec.(*ast.TypeSpec)
		doc := ts.Doc
		if doc == nil && len(gd.Specs) == 1 {
			doc = gd.Doc
		}
		tm := markers(doc)
		if _, ok := tm["enum"]; ok {
			enums = append(enums, ts.Name.Name)
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			continue
		}
		info := typeInfo{mapType: first(tm["structType"])}
		for _, field := range st.Fields.List {
			if fi, ok := readField(field); ok {
				info.fields = append(info.fields, fi)
			}
		}
		p.types[ts.Name.Name] = info
	}
	return enums
}

func readField(field *ast.Field) (fieldInfo, bool) {
	if field.Tag == nil {
		return fieldInfo{}, false
	}
	tag, _ := strconv.Unquote(field.Tag.Value)
	jsonTag, ok := reflect.StructTag(tag).Lookup("json")
	name, opts, _ := strings.Cut(jsonTag, ",")
	if !ok || name == "-" || name == "" {
		return fieldInfo{}, false // untagged, skipped or inlined
	}
	m := markers(field.Doc)
	omitempty := slices.Contains(strings.Split(opts, ","), "omitempty")
	_, req := m["required"]
	_, opt := m["optional"]
	fi := fieldInfo{
		json:        name,
		required:    req && omitempty,
		optional:    opt && !req && !omitempty,
		listType:    first(m["listType"]),
		listMapKeys: m["listMapKey"],
		mapType:     first(m["mapType"]),
	}
	if def := first(m["default"]); def != "" {
		if ref, ok := strings.CutPrefix(def, "ref("); ok {
			ref = strings.TrimSuffix(ref, ")")
			fi.defaultRef = ref[strings.LastIndex(ref, ".")+1:]
		} else if json.Valid([]byte(def)) {
			fi.defaultJSON = def
		}
	}
	return fi, !fi.empty() || fi.defaultRef != ""
}

func readConsts(gd *ast.GenDecl, consts map[string]any, ofType map[string][]any) {
	for _, spec := range gd.Specs {
		vs := spec.(*ast.ValueSpec)
		typ := ""
		if id, ok := vs.Type.(*ast.Ident); ok {
			typ = id.Name
		}
		for i, n := range vs.Names {
			if i >= len(vs.Values) {
				break
			}
			lit, ok := vs.Values[i].(*ast.BasicLit)
			if !ok {
				continue
			}
			var v any
			switch lit.Kind {
			case token.STRING:
				v, _ = strconv.Unquote(lit.Value)
			case token.INT:
				v, _ = strconv.ParseInt(lit.Value, 0, 64)
			default:
				continue
			}
			consts[n.Name] = v
			if typ != "" {
				ofType[typ] = append(ofType[typ], v)
			}
		}
	}
}

// markers returns the "+key=value" comment markers of a comment group ("+optional" has one empty value).
func markers(doc *ast.CommentGroup) map[string][]string {
	out := map[string][]string{}
	if doc == nil {
		return out
	}
	for _, c := range doc.List {
		line := strings.TrimSpace(strings.TrimPrefix(c.Text, "//"))
		if !strings.HasPrefix(line, "+") {
			continue
		}
		k, v, _ := strings.Cut(line[1:], "=")
		out[k] = append(out[k], v)
	}
	return out
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func render(api, machinery module, pkgs []pkg) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by markergen from %s %s and %s %s. DO NOT EDIT.\n\n",
		api.Path, api.Version, machinery.Path, machinery.Version)
	b.WriteString("package openapi\n\n")
	fmt.Fprintf(&b, "// markersSource names the module versions the markers were read from.\n")
	fmt.Fprintf(&b, "const markersSource = %q\n\n", api.Path+"@"+api.Version+" "+machinery.Path+"@"+machinery.Version)
	b.WriteString("// generatedMarkers holds the comment markers of API struct types, by Go package path and type name.\n")
	b.WriteString("var generatedMarkers = map[string]typeMarkers{\n")
	slices.SortFunc(pkgs, func(a, b pkg) int { return strings.Compare(a.path, b.path) })
	for _, p := range pkgs {
		for _, name := range sortedKeys(p.types) {
			renderType(&b, p.path+"."+name, p.types[name])
		}
	}
	b.WriteString("}\n\n")
	b.WriteString("// generatedEnums holds the values of +enum string types, by Go package path and type name.\n")
	b.WriteString("var generatedEnums = map[string][]string{\n")
	for _, p := range pkgs {
		for _, name := range sortedKeys(p.enums) {
			fmt.Fprintf(&b, "%q: {", p.path+"."+name)
			for i, v := range p.enums[name] {
				if i > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "%q", v)
			}
			b.WriteString("},\n")
		}
	}
	b.WriteString("}\n")
	return format.Source(b.Bytes())
}

func renderType(b *bytes.Buffer, key string, t typeInfo) {
	var fields []fieldInfo
	for _, f := range t.fields {
		if !f.empty() {
			fields = append(fields, f)
		}
	}
	if t.mapType == "" && len(fields) == 0 {
		return
	}
	fmt.Fprintf(b, "%q: {", key)
	if t.mapType != "" {
		fmt.Fprintf(b, "MapType: %q, ", t.mapType)
	}
	if len(fields) > 0 {
		b.WriteString("Fields: map[string]fieldMarkers{\n")
		for _, f := range fields {
			fmt.Fprintf(b, "%q: {", f.json)
			var parts []string
			if f.required {
				parts = append(parts, "Required: true")
			}
			if f.optional {
				parts = append(parts, "Optional: true")
			}
			if f.listType != "" {
				parts = append(parts, fmt.Sprintf("ListType: %q", f.listType))
			}
			if len(f.listMapKeys) > 0 {
				parts = append(parts, fmt.Sprintf("ListMapKeys: %#v", f.listMapKeys))
			}
			if f.mapType != "" {
				parts = append(parts, fmt.Sprintf("MapType: %q", f.mapType))
			}
			if f.defaultJSON != "" {
				parts = append(parts, fmt.Sprintf("Default: %q", f.defaultJSON))
			}
			b.WriteString(strings.Join(parts, ", "))
			b.WriteString("},\n")
		}
		b.WriteString("},\n")
	}
	b.WriteString("},\n")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
