package platform

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// op documents one operation of the API. The OpenAPI document is built from these and the route table (a test
// checks they cover each other), with schemas reflected from the request and view types.
type op struct {
	summary string
	// role is the least team role the operation needs ("" for the caller's own resources).
	role     string
	body     any // request body type (nil: none)
	response any // response body type (nil: 204 or a custom content type)
	status   int
	// contentType of a non-JSON response.
	contentType string
}

type itemsOf[T any] struct {
	Items []T `json:"items"`
}

var operations = map[string]op{
	"GET /me":                                          {summary: "The caller and their teams", response: meView{}, status: 200},
	"GET /teams":                                       {summary: "The caller's teams", response: itemsOf[teamView]{}, status: 200},
	"POST /teams":                                      {summary: "Create a team; the caller becomes its owner", body: createTeamBody{}, response: teamView{}, status: 201},
	"GET /teams/:team":                                 {summary: "A team", role: "viewer", response: teamView{}, status: 200},
	"PATCH /teams/:team":                               {summary: "Rename a team", role: "admin", body: renameTeamBody{}, response: teamView{}, status: 200},
	"DELETE /teams/:team":                              {summary: "Delete a team, its clusters and everything in them", role: "owner", status: 204},
	"POST /teams/:team/transfer":                       {summary: "Make another member the owner; the owner becomes admin", role: "owner", body: transferBody{}, response: itemsOf[memberView]{}, status: 200},
	"GET /teams/:team/members":                         {summary: "Members and their roles", role: "viewer", response: itemsOf[memberView]{}, status: 200},
	"PATCH /teams/:team/members/:user":                 {summary: "Change a member's role (admin, member, viewer)", role: "admin", body: roleBody{}, response: itemsOf[memberView]{}, status: 200},
	"DELETE /teams/:team/members/:user":                {summary: "Remove a member (any member may remove themselves; not the owner)", role: "admin", status: 204},
	"GET /teams/:team/invitations":                     {summary: "Invitations, pending and past", role: "admin", response: itemsOf[invitationView]{}, status: 200},
	"POST /teams/:team/invitations":                    {summary: "Invite someone by email; the token is shown once", role: "admin", body: createInvitationBody{}, response: invitationCreated{}, status: 201},
	"DELETE /teams/:team/invitations/:id":              {summary: "Revoke an invitation", role: "admin", status: 204},
	"POST /invitations/accept":                         {summary: "Accept an invitation (signed in, or creating an account with a password)", body: acceptBody{}, response: teamView{}, status: 200},
	"GET /teams/:team/clusters":                        {summary: "The team's clusters", role: "viewer", response: itemsOf[clusterView]{}, status: 200},
	"POST /teams/:team/clusters":                       {summary: "Create a cluster", role: "admin", body: createClusterBody{}, response: clusterView{}, status: 201},
	"GET /teams/:team/audit":                           {summary: "The team's audit log, newest first (filters: cluster, actor, action, since, until, limit, before)", role: "admin", response: itemsOf[auditView]{}, status: 200},
	"GET /clusters/:cluster":                           {summary: "A cluster", role: "viewer", response: clusterView{}, status: 200},
	"DELETE /clusters/:cluster":                        {summary: "Delete a cluster and everything in it", role: "admin", status: 204},
	"POST /clusters/:cluster/kubeconfig":               {summary: "A kubeconfig for the cluster with a new API token of the caller", role: "viewer", body: kubeconfigBody{}, status: 201, contentType: "application/yaml"},
	"GET /clusters/:cluster/join-tokens":               {summary: "The cluster's node join tokens", role: "admin", response: itemsOf[joinTokenView]{}, status: 200},
	"POST /clusters/:cluster/join-tokens":              {summary: "Create a node join token (K10<CA hash>::<id>.<secret>); shown once; it expires after 24 hours unless expiresAt (or neverExpires: true) says otherwise", role: "admin", body: createJoinTokenBody{}, response: joinTokenCreated{}, status: 201},
	"DELETE /clusters/:cluster/join-tokens/:id":        {summary: "Revoke a join token", role: "admin", status: 204},
	"GET /tokens":                                      {summary: "The caller's API tokens (never their secrets)", response: itemsOf[tokenView]{}, status: 200},
	"POST /tokens":                                     {summary: "Create an API token for the caller; shown once", body: createTokenBody{}, response: tokenCreated{}, status: 201},
	"DELETE /tokens/:id":                               {summary: "Revoke one of the caller's API tokens", status: 204},
	"GET /cacerts":                                     {summary: "The CA of the server's certificate (PEM), whose SHA-256 (DER) join tokens pin; no authentication", contentType: "application/x-pem-file", status: 200},
	"POST /join":                                       {summary: "Exchange a join token for a node credential bound to one node name (the agent does this once)", body: joinBody{}, response: joinedView{}, status: 201},
	"GET /clusters/:cluster/node-credentials":          {summary: "The cluster's node credentials (never their secrets)", role: "admin", response: itemsOf[nodeCredentialView]{}, status: 200},
	"DELETE /clusters/:cluster/node-credentials/:node": {summary: "Revoke a node's credential: its agent is refused from the next request and the name may join again", role: "admin", status: 204},
	"POST /login":                                      {summary: "Sign in with email and password: sets the session cookie and answers the CSRF token", body: loginBody{}, response: sessionView{}, status: 200},
	"GET /session":                                     {summary: "The caller's browser session and its CSRF token", response: sessionView{}, status: 200},
	"POST /logout":                                     {summary: "End the caller's browser session", status: 204},
	"POST /password":                                   {summary: "Change the caller's password; every session of theirs ends", body: passwordBody{}, status: 204},
}

type invitationCreated struct {
	Token      string         `json:"token"`
	Invitation invitationView `json:"invitation"`
}

type joinTokenCreated struct {
	Token     string        `json:"token"`
	JoinToken joinTokenView `json:"joinToken"`
}

type tokenCreated struct {
	Token    string    `json:"token"`
	APIToken tokenView `json:"apiToken"`
}

var (
	openAPIOnce sync.Once
	openAPIDoc  []byte
)

func (a *API) serveOpenAPI(c echo.Context) error {
	openAPIOnce.Do(func() { openAPIDoc, _ = json.MarshalIndent(buildOpenAPI(), "", "  ") })
	return c.Blob(http.StatusOK, "application/json", openAPIDoc)
}

// buildOpenAPI is the OpenAPI 3.1 document of the platform API.
func buildOpenAPI() map[string]any {
	schemas := map[string]any{
		"Problem": schemaOf(reflect.TypeFor[Problem](), nil),
	}
	paths := map[string]map[string]any{}
	for key, o := range operations {
		method, path, _ := strings.Cut(key, " ")
		oaPath := Prefix + toOpenAPIPath(path)
		if paths[oaPath] == nil {
			paths[oaPath] = map[string]any{}
		}
		operation := map[string]any{"summary": o.summary, "operationId": operationID(method, path)}
		if o.role != "" {
			operation["description"] = "Needs the team role " + o.role + " or higher."
		}
		var params []any
		for _, seg := range strings.Split(path, "/") {
			if name, ok := strings.CutPrefix(seg, ":"); ok {
				params = append(params, map[string]any{"name": name, "in": "path", "required": true,
					"schema": map[string]any{"type": "string"}})
			}
		}
		if len(params) > 0 {
			operation["parameters"] = params
		}
		if o.body != nil {
			operation["requestBody"] = map[string]any{"required": method != http.MethodPost || !strings.HasSuffix(path, "kubeconfig"),
				"content": map[string]any{"application/json": map[string]any{"schema": schemaOf(reflect.TypeOf(o.body), schemas)}}}
		}
		ok := map[string]any{"description": http.StatusText(o.status)}
		switch {
		case o.contentType != "":
			ok["content"] = map[string]any{o.contentType: map[string]any{"schema": map[string]any{"type": "string"}}}
		case o.response != nil:
			ok["content"] = map[string]any{"application/json": map[string]any{"schema": schemaOf(reflect.TypeOf(o.response), schemas)}}
		}
		problemRef := map[string]any{"description": "A problem (RFC 9457)",
			"content": map[string]any{"application/problem+json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Problem"}}}}
		operation["responses"] = map[string]any{strconv.Itoa(o.status): ok, "default": problemRef}
		if path != "/invitations/accept" && path != "/login" && path != "/join" && path != "/cacerts" {
			operation["security"] = []any{map[string]any{"bearer": []any{}}, map[string]any{"session": []any{}}}
		}
		paths[oaPath][strings.ToLower(method)] = operation
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "Wheelhouse platform API", "version": "v1",
			"description": "Teams, members, invitations, clusters, API tokens, kubeconfigs, node join tokens and the audit log. Errors are application/problem+json. See docs/api.md."},
		"paths": paths,
		"components": map[string]any{"schemas": schemas,
			"securitySchemes": map[string]any{
				"bearer": map[string]any{"type": "http", "scheme": "bearer", "description": "A personal API token (whp_...)"},
				"session": map[string]any{"type": "apiKey", "in": "cookie", "name": SessionCookie,
					"description": "A browser session from POST /login; state changes also need the X-CSRF-Token header"}}},
	}
}

func toOpenAPIPath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if name, ok := strings.CutPrefix(s, ":"); ok {
			segs[i] = "{" + name + "}"
		}
	}
	return strings.Join(segs, "/")
}

func operationID(method, path string) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(method))
	for _, s := range strings.Split(path, "/") {
		s = strings.TrimPrefix(s, ":")
		for _, part := range strings.Split(s, "-") {
			if part != "" {
				b.WriteString(strings.ToUpper(part[:1]) + part[1:])
			}
		}
	}
	return b.String()
}

// schemaOf reflects a JSON schema from a Go type; named structs go to schemas (when given) as $refs.
func schemaOf(t reflect.Type, schemas map[string]any) map[string]any {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[time.Time]():
		return map[string]any{"type": "string", "format": "date-time"}
	case t.Kind() == reflect.String:
		return map[string]any{"type": "string"}
	case t.Kind() == reflect.Bool:
		return map[string]any{"type": "boolean"}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return map[string]any{"type": "integer"}
	case t.Kind() == reflect.Slice:
		return map[string]any{"type": "array", "items": schemaOf(t.Elem(), schemas)}
	case t.Kind() == reflect.Map || t.Kind() == reflect.Interface:
		return map[string]any{"type": "object"}
	case t.Kind() != reflect.Struct:
		return map[string]any{}
	}
	props := map[string]any{}
	var required []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		props[name] = schemaOf(f.Type, schemas)
		if !strings.Contains(opts, "omitempty") && f.Type.Kind() != reflect.Pointer {
			required = append(required, name)
		}
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	name := schemaName(t)
	if schemas == nil || name == "" {
		return s
	}
	if _, ok := schemas[name]; !ok {
		schemas[name] = s
	}
	return map[string]any{"$ref": "#/components/schemas/" + name}
}

// schemaName is a type's schema name: createTeamBody → CreateTeamBody, itemsOf[teamView] → TeamViewList.
func schemaName(t reflect.Type) string {
	n := t.Name()
	if i := strings.IndexByte(n, '['); i >= 0 {
		inner := n[i+1 : len(n)-1]
		if j := strings.LastIndexByte(inner, '.'); j >= 0 {
			inner = inner[j+1:]
		}
		return strings.ToUpper(inner[:1]) + inner[1:] + "List"
	}
	if n == "" {
		return ""
	}
	return strings.ToUpper(n[:1]) + n[1:]
}
