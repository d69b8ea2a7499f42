package openapi

import (
	"net/http"
	"slices"

	openapi_v3 "github.com/google/gnostic-models/openapiv3"
	"google.golang.org/protobuf/proto"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Content types of the v3 documents, as for v2.
const (
	mediaV3Proto           = "application/com.github.proto-openapi.spec.v3.v1.0+protobuf"
	mediaV3ProtoDeprecated = "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"
)

// v3Document writes the OpenAPI 3.0 document of one group version: its routes and the definitions they reach.
func v3Document(b *builder, routes []route, version string) (*document, error) {
	doc := &spec3.OpenAPI{
		Version:    "3.0.0",
		Info:       &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: version}},
		Paths:      &spec3.Paths{Paths: make(map[string]*spec3.Path, len(routes))},
		Components: &spec3.Components{Schemas: map[string]*spec.Schema{}},
	}
	var roots []string
	for _, rt := range routes {
		path := &spec3.Path{}
		for _, p := range rt.params {
			path.Parameters = append(path.Parameters, v3Param(p))
		}
		for _, op := range rt.ops {
			o := v3Operation(op)
			switch op.method {
			case "get":
				path.Get = o
			case "post":
				path.Post = o
			case "put":
				path.Put = o
			case "patch":
				path.Patch = o
			case "delete":
				path.Delete = o
			}
			roots = append(roots, op.body)
			for _, r := range op.responses {
				roots = append(roots, r.definition)
			}
		}
		doc.Paths.Paths[rt.path] = path
	}
	for name := range closure(b.defs, slices.DeleteFunc(roots, func(s string) bool { return s == "" })) {
		doc.Components.Schemas[name] = v3Definition(b, name)
	}
	data, err := doc.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return newDocument(data, mediaV3Proto, v3Proto), nil
}

func v3Operation(op operation) *spec3.Operation {
	o := &spec3.Operation{OperationProps: spec3.OperationProps{
		Tags:        []string{op.tag},
		Description: op.description,
		OperationId: op.id,
		Responses: &spec3.Responses{ResponsesProps: spec3.ResponsesProps{
			StatusCodeResponses: map[int]*spec3.Response{
				http.StatusUnauthorized: {ResponseProps: spec3.ResponseProps{Description: "Unauthorized"}},
			},
		}},
	}}
	// Parameters are written inline, never as references: kubectl's QueryParamVerifierV3 looks for
	// fieldValidation by name among a PATCH operation's own parameters.
	for _, p := range op.params {
		o.Parameters = append(o.Parameters, v3Param(p))
	}
	if op.body != "" {
		consumes := op.consumes
		if consumes == nil {
			consumes = []string{"*/*"}
		}
		o.RequestBody = &spec3.RequestBody{RequestBodyProps: spec3.RequestBodyProps{
			Content: content(consumes, op.body), Required: op.method != "delete",
		}}
	}
	for _, r := range op.responses {
		resp := &spec3.Response{ResponseProps: spec3.ResponseProps{Description: r.description}}
		if r.definition != "" {
			resp.Content = content(op.produces, r.definition)
		}
		o.Responses.StatusCodeResponses[r.code] = resp
	}
	addOperationExtensions(&o.VendorExtensible, op)
	return o
}

// content maps each media type to a reference to the definition.
func content(media []string, definition string) map[string]*spec3.MediaType {
	out := make(map[string]*spec3.MediaType, len(media))
	for _, m := range media {
		out[m] = &spec3.MediaType{MediaTypeProps: spec3.MediaTypeProps{Schema: &spec.Schema{
			SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(componentsPrefix + definition)},
		}}}
	}
	return out
}

func v3Param(p param) *spec3.Parameter {
	return &spec3.Parameter{ParameterProps: spec3.ParameterProps{
		Name: p.name, In: p.in, Description: p.description, Required: p.required,
		Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{p.typ}}},
	}}
}

// v3Proto converts a JSON document to gnostic's protobuf form.
func v3Proto(data []byte) ([]byte, error) {
	doc, err := openapi_v3.ParseDocument(data)
	if err != nil {
		return nil, err
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(doc)
}
