package platform

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

// Problem is an RFC 9457 problem detail: every error of the platform API is one, as application/problem+json.
type Problem struct {
	Type     string       `json:"type"`
	Title    string       `json:"title"`
	Status   int          `json:"status"`
	Detail   string       `json:"detail,omitempty"`
	Instance string       `json:"instance,omitempty"`
	Errors   []FieldError `json:"errors,omitempty"`
}

// FieldError names one invalid field of a request body or query.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (p *Problem) Error() string { return fmt.Sprintf("%d %s: %s", p.Status, p.Title, p.Detail) }

const problemBase = "https://wheelhouse.dev/problems/"

func problem(status int, code, title, detail string) *Problem {
	return &Problem{Type: problemBase + code, Title: title, Status: status, Detail: detail}
}

func badRequest(detail string) *Problem {
	return problem(http.StatusBadRequest, "bad-request", "Bad request", detail)
}

// invalid is 422 with the fields at fault.
func invalid(errs ...FieldError) *Problem {
	p := problem(http.StatusUnprocessableEntity, "invalid", "Invalid request", "the request has invalid fields")
	p.Errors = errs
	return p
}

func unauthenticated() *Problem {
	return problem(http.StatusUnauthorized, "unauthenticated", "Unauthenticated",
		"a valid API token is required (Authorization: Bearer <token>)")
}

func forbidden(detail string) *Problem {
	return problem(http.StatusForbidden, "forbidden", "Forbidden", detail)
}

func notFound(what string) *Problem {
	return problem(http.StatusNotFound, "not-found", "Not found", what+" not found")
}

func conflict(detail string) *Problem {
	return problem(http.StatusConflict, "conflict", "Conflict", detail)
}

// fromTenancy maps a tenancy error to a problem; detail is shown for client errors only. Internal errors are
// logged by the caller and shown without their text.
func fromTenancy(err error, what string) *Problem {
	var p *Problem
	switch {
	case errors.As(err, &p):
		return p
	case errors.Is(err, tenancy.ErrNotFound):
		return notFound(what)
	case errors.Is(err, tenancy.ErrConflict):
		return conflict(strings.TrimPrefix(err.Error(), "tenancy: "))
	case errors.Is(err, tenancy.ErrInvalid):
		return invalid(FieldError{Field: "", Message: strings.TrimPrefix(err.Error(), "tenancy: ")})
	case errors.Is(err, tenancy.ErrUnauthenticated):
		return unauthenticated()
	case errors.Is(err, tenancy.ErrUnavailable):
		return problem(http.StatusServiceUnavailable, "unavailable", "Service unavailable",
			"the database is unavailable; retry shortly")
	}
	return problem(http.StatusInternalServerError, "internal", "Internal error", "the request failed on the server")
}

// writeProblem answers with p.
func writeProblem(c echo.Context, p *Problem) error {
	if p.Instance == "" {
		p.Instance = c.Request().URL.Path
	}
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return c.Blob(p.Status, "application/problem+json", b)
}

// maxBody bounds platform request bodies.
const maxBody = 1 << 20

// decode reads a JSON body into v strictly: unknown fields, trailing data, wrong types and oversize bodies are
// 400 problems naming the field where there is one.
func decode(c echo.Context, v any) *Problem {
	r := c.Request()
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return problem(http.StatusUnsupportedMediaType, "unsupported-media-type", "Unsupported media type",
			"send the body as application/json")
	}
	dec := json.NewDecoder(http.MaxBytesReader(c.Response(), r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		var big *http.MaxBytesError
		switch {
		case errors.Is(err, io.EOF):
			return badRequest("the request body is empty: a JSON object is required")
		case errors.As(err, &syn):
			return badRequest(fmt.Sprintf("the request body is not valid JSON (at byte %d)", syn.Offset))
		case errors.As(err, &typ):
			p := badRequest(fmt.Sprintf("field %q must be %s", typ.Field, typ.Type))
			p.Errors = []FieldError{{Field: typ.Field, Message: "must be " + typ.Type.String()}}
			return p
		case errors.As(err, &big):
			return problem(http.StatusRequestEntityTooLarge, "too-large", "Request body too large",
				fmt.Sprintf("the body is limited to %d bytes", big.Limit))
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			p := badRequest(fmt.Sprintf("unknown field %q", f))
			p.Errors = []FieldError{{Field: f, Message: "unknown field"}}
			return p
		}
		return badRequest("the request body could not be read as JSON")
	}
	if dec.More() {
		return badRequest("the request body has data after the JSON object")
	}
	return nil
}
