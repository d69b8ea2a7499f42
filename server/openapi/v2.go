package openapi

import (
	"net/http"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Content types of the v2 document. Clients ask for the protobuf form under either name; it is served under the
// current one.
const (
	mediaV2Proto           = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
	mediaV2ProtoDeprecated = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
)

// v2Document writes the Swagger 2.0 document: every definition, defaults pruned, and every route.
func v2Document(b *builder, routes []route, version string) (*document, error) {
	sw := &spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger:     "2.0",
		Info:        &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: version}},
		Paths:       &spec.Paths{Paths: make(map[string]spec.PathItem, len(routes))},
		Definitions: make(spec.Definitions, len(b.defs)),
	}}
	for name, d := range b.defs {
		sw.Definitions[name] = transform(*d, pruneDefault)
	}
	for _, rt := range routes {
		item := spec.PathItem{}
		for _, p := range rt.params {
			item.Parameters = append(item.Parameters, v2Param(p))
		}
		for _, op := range rt.ops {
			o := v2Operation(op)
			switch op.method {
			case "get":
				item.Get = o
			case "post":
				item.Post = o
			case "put":
				item.Put = o
			case "patch":
				item.Patch = o
			case "delete":
				item.Delete = o
			}
		}
		sw.Paths.Paths[rt.path] = item
	}
	data, err := sw.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return newDocument(data, mediaV2Proto, v2Proto), nil
}

func v2Operation(op operation) *spec.Operation {
	o := &spec.Operation{OperationProps: spec.OperationProps{
		Description: op.description,
		ID:          op.id,
		Tags:        []string{op.tag},
		Schemes:     []string{"https"},
		Consumes:    op.consumes,
		Produces:    op.produces,
		Responses: &spec.Responses{ResponsesProps: spec.ResponsesProps{
			StatusCodeResponses: map[int]spec.Response{
				http.StatusUnauthorized: {ResponseProps: spec.ResponseProps{Description: "Unauthorized"}},
			},
		}},
	}}
	if o.Consumes == nil {
		o.Consumes = []string{"*/*"}
	}
	for _, p := range op.params {
		o.Parameters = append(o.Parameters, v2Param(p))
	}
	if op.body != "" {
		body := refSchema(op.body)
		o.Parameters = append(o.Parameters, spec.Parameter{ParamProps: spec.ParamProps{
			Name: "body", In: "body", Required: op.method != "delete", Schema: &body,
		}})
	}
	for _, r := range op.responses {
		resp := spec.Response{ResponseProps: spec.ResponseProps{Description: r.description}}
		if r.definition != "" {
			s := refSchema(r.definition)
			resp.Schema = &s
		}
		o.Responses.StatusCodeResponses[r.code] = resp
	}
	addOperationExtensions(&o.VendorExtensible, op)
	return o
}

func v2Param(p param) spec.Parameter {
	return spec.Parameter{
		ParamProps:   spec.ParamProps{Name: p.name, In: p.in, Description: p.description, Required: p.required},
		SimpleSchema: spec.SimpleSchema{Type: p.typ},
	}
}

// addOperationExtensions sets x-kubernetes-action and x-kubernetes-group-version-kind (a single object on
// operations, unlike the list on definitions).
func addOperationExtensions(v *spec.VendorExtensible, op operation) {
	if op.action != "" {
		v.AddExtension(extAction, op.action)
	}
	if op.gvk.Kind != "" {
		v.AddExtension(extGVK, gvkMap(op.gvk))
	}
}

// v2Proto converts the JSON document to gnostic's protobuf form, which kubectl and client-go discovery ask for.
func v2Proto(data []byte) ([]byte, error) {
	doc, err := openapi_v2.ParseDocument(data)
	if err != nil {
		return nil, err
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(doc)
}
