package perf

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// SchedWarning is a message the API, controllers or scheduler logged at warning level or above during a run,
// with how often and the first occurrence in full.
type SchedWarning struct {
	Level string
	Msg   string
	Count int
	First string
}

// warnLog is the log of the components under test in one run: instead of printing what they log (a scheduler
// in trouble logs a line per pod per cycle), it counts warnings and errors by message and keeps the first of
// each, for the report. Info and debug records are dropped.
type warnLog struct {
	st    *warnState
	attrs []slog.Attr
	group string
}

type warnState struct {
	mu sync.Mutex // guards by and order
	by map[string]*SchedWarning
	// order is every distinct message, first seen first.
	order []*SchedWarning
}

var _ slog.Handler = warnLog{}

func newWarnLog() warnLog { return warnLog{st: &warnState{by: map[string]*SchedWarning{}}} }

func (h warnLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h warnLog) Handle(_ context.Context, r slog.Record) error {
	key := r.Level.String() + "\x00" + r.Message
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	w, ok := h.st.by[key]
	if !ok {
		var b strings.Builder
		b.WriteString(r.Message)
		for _, a := range h.attrs { // qualified by their groups in WithAttrs
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		}
		r.Attrs(func(a slog.Attr) bool {
			fmt.Fprintf(&b, " %s%s=%v", h.group, a.Key, a.Value)
			return true
		})
		w = &SchedWarning{Level: r.Level.String(), Msg: r.Message, First: trimQuery(b.String(), 600)}
		h.st.by[key] = w
		h.st.order = append(h.st.order, w)
	}
	w.Count++
	return nil
}

func (h warnLog) WithAttrs(as []slog.Attr) slog.Handler {
	h.attrs = slices.Clip(h.attrs)
	for _, a := range as {
		a.Key = h.group + a.Key
		h.attrs = append(h.attrs, a)
	}
	return h
}

func (h warnLog) WithGroup(name string) slog.Handler {
	h.group += name + "."
	return h
}

// warnings is what was logged so far, first seen first.
func (h warnLog) warnings() []SchedWarning {
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	out := make([]SchedWarning, len(h.st.order))
	for i, w := range h.st.order {
		out[i] = *w
	}
	return out
}
