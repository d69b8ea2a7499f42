package framework

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// callLog records plugin calls ("name.Point" or "name.Point/node"); Score runs in parallel.
type callLog struct {
	mu    sync.Mutex // guards calls
	calls []string
}

func (l *callLog) add(s string) {
	l.mu.Lock()
	l.calls = append(l.calls, s)
	l.mu.Unlock()
}

func (l *callLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// fakePlugin implements every extension point but normalization with fixed answers.
type fakePlugin struct {
	name      string
	log       *callLog
	preFilter *Status
	filter    map[string]*Status // by node; absent: success
	extension *Status            // AddPod / RemovePod
	post      *Status
	postNode  string
	preScore  *Status
	scores    map[string]int64 // by node
	scoreErr  *Status
	events    []ClusterEvent
}

var (
	_ PreFilterPlugin     = (*fakePlugin)(nil)
	_ PreFilterExtensions = (*fakePlugin)(nil)
	_ FilterPlugin        = (*fakePlugin)(nil)
	_ PostFilterPlugin    = (*fakePlugin)(nil)
	_ PreScorePlugin      = (*fakePlugin)(nil)
	_ ScorePlugin         = (*fakePlugin)(nil)
	_ EnqueueExtensions   = (*fakePlugin)(nil)
	_ ScoreNormalizer     = (*fakeNormalizer)(nil)
)

func (p *fakePlugin) Name() string { return p.name }

func (p *fakePlugin) PreFilter(context.Context, *CycleState, *PodInfo, *Snapshot) *Status {
	p.log.add(p.name + ".PreFilter")
	return p.preFilter
}

func (p *fakePlugin) Filter(_ context.Context, _ *CycleState, _ *PodInfo, n *NodeInfo) *Status {
	p.log.add(p.name + ".Filter/" + n.Name())
	return p.filter[n.Name()]
}

func (p *fakePlugin) AddPod(_ context.Context, _ *CycleState, _ *PodInfo, add *PodInfo, _ *NodeInfo) *Status {
	p.log.add(p.name + ".AddPod/" + add.Pod.Name)
	return p.extension
}

func (p *fakePlugin) RemovePod(_ context.Context, _ *CycleState, _ *PodInfo, remove *PodInfo, _ *NodeInfo) *Status {
	p.log.add(p.name + ".RemovePod/" + remove.Pod.Name)
	return p.extension
}

func (p *fakePlugin) PostFilter(context.Context, *CycleState, *PodInfo, *Snapshot, NodeToStatus) (*PostFilterResult, *Status) {
	p.log.add(p.name + ".PostFilter")
	if p.post.IsSuccess() {
		return &PostFilterResult{NominatedNodeName: p.postNode}, nil
	}
	return nil, p.post
}

func (p *fakePlugin) PreScore(context.Context, *CycleState, *PodInfo, *Snapshot, []*NodeInfo) *Status {
	p.log.add(p.name + ".PreScore")
	return p.preScore
}

func (p *fakePlugin) Score(_ context.Context, _ *CycleState, _ *PodInfo, n *NodeInfo) (int64, *Status) {
	if p.scoreErr != nil {
		return 0, p.scoreErr
	}
	return p.scores[n.Name()], nil
}

func (p *fakePlugin) EventsToRegister() []ClusterEvent { return p.events }

// fakeNormalizer scales its scores so that the highest is MaxNodeScore (plus offset, to go out of range).
type fakeNormalizer struct {
	fakePlugin
	offset int64
}

func (p *fakeNormalizer) NormalizeScore(_ context.Context, _ *CycleState, _ *PodInfo, scores []NodeScore) *Status {
	p.log.add(p.name + ".NormalizeScore")
	var top int64
	for _, s := range scores {
		top = max(top, s.Score)
	}
	for i := range scores {
		if top > 0 {
			scores[i].Score = scores[i].Score*MaxNodeScore/top + p.offset
		}
	}
	return nil
}

// bareFilter is a plugin with nothing but a name (no EnqueueExtensions).
type bareFilter struct{ name string }

func (b bareFilter) Name() string { return b.name }

func (bareFilter) Filter(context.Context, *CycleState, *PodInfo, *NodeInfo) *Status { return nil }

func testNodes(names ...string) []*NodeInfo {
	var out []*NodeInfo
	for _, n := range names {
		out = append(out, NewNodeInfo(testNode(n, nil)))
	}
	return out
}

// statusString is "Code plugin: message" ("" for success).
func statusString(s *Status) string {
	if s.IsSuccess() {
		return ""
	}
	names := map[Code]string{Unschedulable: "Unschedulable", UnschedulableAndUnresolvable: "UnschedulableAndUnresolvable", Error: "Error", Skip: "Skip"}
	return fmt.Sprintf("%s %s: %s", names[s.Code()], s.Plugin(), s.Message())
}

// TestRunPreFilterPlugins: PreFilters run in order; Skip lists the plugin (its Filter and PreFilter
// extensions are then skipped); as upstream (kubernetes#119770), an Unschedulable status lets the rest run
// so that preemption has their state and the last such status is returned, while
// UnschedulableAndUnresolvable and Error stop at once.
func TestRunPreFilterPlugins(t *testing.T) {
	tests := []struct {
		name      string
		statuses  []*Status // of plugins a, b, c
		wantCalls []string
		wantSkip  []string
		want      string
	}{{
		name:      "all succeed",
		statuses:  []*Status{nil, nil, nil},
		wantCalls: []string{"a.PreFilter", "b.PreFilter", "c.PreFilter"},
	}, {
		name:      "skips are collected",
		statuses:  []*Status{NewStatus(Skip), nil, NewStatus(Skip)},
		wantCalls: []string{"a.PreFilter", "b.PreFilter", "c.PreFilter"},
		wantSkip:  []string{"a", "c"},
	}, {
		name:      "Unschedulable lets the others run",
		statuses:  []*Status{nil, NewStatus(Unschedulable, "no"), NewStatus(Skip)},
		wantCalls: []string{"a.PreFilter", "b.PreFilter", "c.PreFilter"},
		wantSkip:  []string{"c"},
		want:      "Unschedulable b: no",
	}, {
		name:      "the last Unschedulable is returned",
		statuses:  []*Status{NewStatus(Unschedulable, "first"), nil, NewStatus(Unschedulable, "last")},
		wantCalls: []string{"a.PreFilter", "b.PreFilter", "c.PreFilter"},
		want:      "Unschedulable c: last",
	}, {
		name:      "UnschedulableAndUnresolvable stops",
		statuses:  []*Status{NewStatus(Unschedulable, "maybe"), NewStatus(UnschedulableAndUnresolvable, "never"), nil},
		wantCalls: []string{"a.PreFilter", "b.PreFilter"},
		want:      "UnschedulableAndUnresolvable b: never",
	}, {
		name:      "Error stops",
		statuses:  []*Status{NewStatus(Skip), AsStatus(fmt.Errorf("boom")), nil},
		wantCalls: []string{"a.PreFilter", "b.PreFilter"},
		wantSkip:  []string{"a"},
		want:      "Error b: boom",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			log := &callLog{}
			f := &Framework{}
			for i, name := range []string{"a", "b", "c"} {
				f.PreFilter = append(f.PreFilter, &fakePlugin{name: name, log: log, preFilter: tc.statuses[i]})
			}
			skip, st := f.RunPreFilterPlugins(t.Context(), NewCycleState(), mustInfo(t, podSpec(corev1.PodSpec{})), NewSnapshot("c", nil, nil))
			if diff := cmp.Diff(tc.wantCalls, log.get()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if got := sets.List(skip); !cmp.Equal(got, tc.wantSkip, cmpEmpty) {
				t.Errorf("skip = %v, want %v", got, tc.wantSkip)
			}
			if got := statusString(st); got != tc.want {
				t.Errorf("status %q, want %q", got, tc.want)
			}
		})
	}
}

var cmpEmpty = cmp.Comparer(func(a, b []string) bool { return len(a) == 0 && len(b) == 0 || slices.Equal(a, b) })

// TestRunFilterPlugins: Filters run in profile order and the first rejection wins (later filters are not
// run), naming its plugin; plugins whose PreFilter asked to be skipped are not run; without a PreFilter pass
// every Filter runs.
func TestRunFilterPlugins(t *testing.T) {
	tests := []struct {
		name      string
		preFilter bool
		skipA     bool
		filters   [3]map[string]*Status // of a, b, c by node
		wantCalls []string
		want      map[string]string
	}{{
		name:      "every node passes every filter",
		preFilter: true,
		wantCalls: []string{"a.Filter/n1", "b.Filter/n1", "c.Filter/n1", "a.Filter/n2", "b.Filter/n2", "c.Filter/n2"},
		want:      map[string]string{"n1": "", "n2": ""},
	}, {
		name:      "the first rejection wins and stops",
		preFilter: true,
		filters: [3]map[string]*Status{nil,
			{"n1": NewStatus(Unschedulable, "b says no")},
			{"n1": NewStatus(UnschedulableAndUnresolvable, "c says never"), "n2": NewStatus(UnschedulableAndUnresolvable, "c says never")}},
		wantCalls: []string{"a.Filter/n1", "b.Filter/n1", "a.Filter/n2", "b.Filter/n2", "c.Filter/n2"},
		want:      map[string]string{"n1": "Unschedulable b: b says no", "n2": "UnschedulableAndUnresolvable c: c says never"},
	}, {
		name:      "a plugin skipped at PreFilter does not filter",
		preFilter: true, skipA: true,
		filters:   [3]map[string]*Status{{"n1": NewStatus(Unschedulable, "a would say no")}},
		wantCalls: []string{"b.Filter/n1", "c.Filter/n1", "b.Filter/n2", "c.Filter/n2"},
		want:      map[string]string{"n1": "", "n2": ""},
	}, {
		name:      "without a PreFilter pass every filter runs",
		skipA:     true,
		filters:   [3]map[string]*Status{{"n1": NewStatus(Unschedulable, "a says no")}},
		wantCalls: []string{"a.Filter/n1", "a.Filter/n2", "b.Filter/n2", "c.Filter/n2"},
		want:      map[string]string{"n1": "Unschedulable a: a says no", "n2": ""},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			log := &callLog{}
			f := &Framework{}
			for i, name := range []string{"a", "b", "c"} {
				p := &fakePlugin{name: name, log: log, filter: tc.filters[i]}
				if name == "a" && tc.skipA {
					p.preFilter = NewStatus(Skip)
				}
				f.PreFilter = append(f.PreFilter, p)
				f.Filter = append(f.Filter, p)
			}
			pod, snap, state := mustInfo(t, podSpec(corev1.PodSpec{})), NewSnapshot("c", testNodes("n1", "n2"), nil), NewCycleState()
			if tc.preFilter {
				if _, st := f.RunPreFilterPlugins(t.Context(), state, pod, snap); !st.IsSuccess() {
					t.Fatal(statusString(st))
				}
			}
			before := len(log.get())
			got := map[string]string{}
			for _, n := range snap.Nodes {
				got[n.Name()] = statusString(f.RunFilterPlugins(t.Context(), state, pod, n))
			}
			if diff := cmp.Diff(tc.wantCalls, log.get()[before:]); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("verdicts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRunPreFilterExtensions: preemption's what-if reaches the PreFilter plugins that did not skip, in
// order, and a failure names its plugin.
func TestRunPreFilterExtensions(t *testing.T) {
	log := &callLog{}
	a := &fakePlugin{name: "a", log: log, preFilter: NewStatus(Skip)}
	b := &fakePlugin{name: "b", log: log}
	c := &fakePlugin{name: "c", log: log}
	f := &Framework{PreFilter: []PreFilterPlugin{a, b, c}}
	pod, other := mustInfo(t, podSpec(corev1.PodSpec{})), mustInfo(t, namedPod("victim", corev1.PodSpec{}))
	node, state := NewNodeInfo(testNode("n1", nil)), NewCycleState()
	if _, st := f.RunPreFilterPlugins(t.Context(), state, pod, NewSnapshot("c", nil, nil)); !st.IsSuccess() {
		t.Fatal(statusString(st))
	}
	before := len(log.get())
	if st := f.RunPreFilterExtensionRemovePod(t.Context(), state, pod, other, node); !st.IsSuccess() {
		t.Fatal(statusString(st))
	}
	if st := f.RunPreFilterExtensionAddPod(t.Context(), state, pod, other, node); !st.IsSuccess() {
		t.Fatal(statusString(st))
	}
	want := []string{"b.RemovePod/victim", "c.RemovePod/victim", "b.AddPod/victim", "c.AddPod/victim"}
	if diff := cmp.Diff(want, log.get()[before:]); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	b.extension = AsStatus(fmt.Errorf("lost track"))
	if got, want := statusString(f.RunPreFilterExtensionAddPod(t.Context(), state, pod, other, node)), "Error b: lost track"; got != want {
		t.Errorf("AddPod status %q, want %q", got, want)
	}
	if got, want := statusString(f.RunPreFilterExtensionRemovePod(t.Context(), state, pod, other, node)), "Error b: lost track"; got != want {
		t.Errorf("RemovePod status %q, want %q", got, want)
	}
}

// TestRunScorePlugins: PreScore Skip drops the plugin's Score; each plugin's scores are normalized (when it
// normalizes), checked to be within 0..100, multiplied by its weight and summed per node, as upstream.
func TestRunScorePlugins(t *testing.T) {
	raw := func(scores ...int64) map[string]int64 {
		return map[string]int64{"n1": scores[0], "n2": scores[1], "n3": scores[2]}
	}
	type plugin struct {
		name      string
		weight    int64
		normalize bool
		offset    int64
		preScore  *Status
		scores    map[string]int64
		scoreErr  *Status
	}
	tests := []struct {
		name    string
		plugins []plugin
		want    map[string]int64
		wantErr string
	}{{
		name:    "raw scores times the weight",
		plugins: []plugin{{name: "a", weight: 1, scores: raw(10, 20, 30)}, {name: "b", weight: 2, scores: raw(100, 0, 50)}},
		want:    map[string]int64{"n1": 210, "n2": 20, "n3": 130},
	}, {
		name:    "normalized before weighting",
		plugins: []plugin{{name: "a", weight: 3, normalize: true, scores: raw(1, 2, 4)}, {name: "b", weight: 1, scores: raw(7, 7, 7)}},
		// a: 25, 50, 100
		want: map[string]int64{"n1": 82, "n2": 157, "n3": 307},
	}, {
		name:    "a plugin skipped at PreScore scores nothing",
		plugins: []plugin{{name: "a", weight: 5, preScore: NewStatus(Skip), scores: raw(100, 100, 100)}, {name: "b", weight: 1, scores: raw(1, 2, 3)}},
		want:    map[string]int64{"n1": 1, "n2": 2, "n3": 3},
	}, {
		name:    "no plugins: zeros",
		want:    map[string]int64{"n1": 0, "n2": 0, "n3": 0},
		plugins: nil,
	}, {
		name:    "a raw score above 100 without normalization is an error",
		plugins: []plugin{{name: "a", weight: 1, scores: raw(101, 0, 0)}},
		wantErr: "Error : plugin a scored node n1 101, outside 0..100",
	}, {
		name:    "out of range after normalization is an error",
		plugins: []plugin{{name: "a", weight: 1, normalize: true, offset: 1, scores: raw(1, 2, 4)}},
		wantErr: "Error : plugin a scored node n3 101, outside 0..100",
	}, {
		name:    "a negative score is an error",
		plugins: []plugin{{name: "a", weight: 1, scores: raw(0, -1, 0)}},
		wantErr: "Error : plugin a scored node n2 -1, outside 0..100",
	}, {
		name:    "a Score failure names the plugin",
		plugins: []plugin{{name: "a", weight: 1, scores: raw(1, 1, 1)}, {name: "b", weight: 1, scoreErr: AsStatus(fmt.Errorf("no data"))}},
		wantErr: "Error b: no data",
	}, {
		name:    "a PreScore failure names the plugin",
		plugins: []plugin{{name: "a", weight: 1, preScore: AsStatus(fmt.Errorf("bad terms"))}},
		wantErr: "Error a: bad terms",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			log := &callLog{}
			f := &Framework{Parallelism: 2}
			for _, p := range tc.plugins {
				fp := fakePlugin{name: p.name, log: log, preScore: p.preScore, scores: p.scores, scoreErr: p.scoreErr}
				var sp interface {
					PreScorePlugin
					ScorePlugin
				} = &fp
				if p.normalize {
					sp = &fakeNormalizer{fakePlugin: fp, offset: p.offset}
				}
				f.PreScore = append(f.PreScore, sp)
				f.Score = append(f.Score, WeightedScore{Plugin: sp, Weight: p.weight})
			}
			snap := NewSnapshot("c", testNodes("n1", "n2", "n3"), nil)
			scores, st := f.RunScorePlugins(t.Context(), NewCycleState(), mustInfo(t, podSpec(corev1.PodSpec{})), snap, snap.Nodes)
			if got := statusString(st); got != tc.wantErr {
				t.Fatalf("status %q, want %q", got, tc.wantErr)
			}
			if tc.wantErr != "" {
				return
			}
			got := map[string]int64{}
			for _, s := range scores {
				got[s.Name] = s.Score
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRunScorePluginsParallel: with enough nodes to go parallel, the totals are those of a sequential run,
// in node order.
func TestRunScorePluginsParallel(t *testing.T) {
	var names []string
	scores := map[string]int64{}
	for i := range 300 {
		name := fmt.Sprintf("n%03d", i)
		names = append(names, name)
		scores[name] = int64(i % 101)
	}
	run := func(parallelism int) []NodeScore {
		p := &fakeNormalizer{fakePlugin: fakePlugin{name: "a", log: &callLog{}, scores: scores}}
		q := &fakePlugin{name: "b", log: &callLog{}, scores: scores}
		f := &Framework{Parallelism: parallelism, Score: []WeightedScore{{Plugin: p, Weight: 2}, {Plugin: q, Weight: 1}}}
		snap := NewSnapshot("c", testNodes(names...), nil)
		out, st := f.RunScorePlugins(t.Context(), NewCycleState(), mustInfo(t, podSpec(corev1.PodSpec{})), snap, snap.Nodes)
		if !st.IsSuccess() {
			t.Fatal(statusString(st))
		}
		return out
	}
	seq, par := run(1), run(8)
	if diff := cmp.Diff(seq, par); diff != "" {
		t.Errorf("parallel differs from sequential (-seq +par):\n%s", diff)
	}
	if seq[0].Name != "n000" || seq[299].Name != "n299" || seq[100].Score != 300 {
		t.Errorf("unexpected totals: first %+v, n100 %+v, last %+v", seq[0], seq[100], seq[299])
	}
}

// TestRunPostFilterPlugins: the first PostFilter that finds a way wins; an Error stops; otherwise the last
// rejection is returned; without PostFilter plugins the pod is Unschedulable.
func TestRunPostFilterPlugins(t *testing.T) {
	tests := []struct {
		name      string
		posts     []*Status
		wantCalls []string
		wantNode  string
		want      string
	}{
		{name: "none", want: "Unschedulable : "},
		{name: "the first success wins", posts: []*Status{nil, nil}, wantCalls: []string{"a.PostFilter"}, wantNode: "n-a"},
		{name: "a rejection lets the next try", posts: []*Status{NewStatus(Unschedulable, "no victims"), nil},
			wantCalls: []string{"a.PostFilter", "b.PostFilter"}, wantNode: "n-b"},
		{name: "an Error stops", posts: []*Status{AsStatus(fmt.Errorf("api down")), nil},
			wantCalls: []string{"a.PostFilter"}, want: "Error a: api down"},
		{name: "all reject: the last", posts: []*Status{NewStatus(Unschedulable, "first"), NewStatus(UnschedulableAndUnresolvable, "last")},
			wantCalls: []string{"a.PostFilter", "b.PostFilter"}, want: "UnschedulableAndUnresolvable b: last"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			log := &callLog{}
			f := &Framework{}
			for i, st := range tc.posts {
				name := string(rune('a' + i))
				f.PostFilter = append(f.PostFilter, &fakePlugin{name: name, log: log, post: st, postNode: "n-" + name})
			}
			r, st := f.RunPostFilterPlugins(t.Context(), NewCycleState(), mustInfo(t, podSpec(corev1.PodSpec{})), NewSnapshot("c", nil, nil), NodeToStatus{})
			if diff := cmp.Diff(tc.wantCalls, log.get()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if got := statusString(st); got != tc.want {
				t.Errorf("status %q, want %q", got, tc.want)
			}
			if got := ""; r != nil {
				got = r.NominatedNodeName
				if got != tc.wantNode {
					t.Errorf("nominated %q, want %q", got, tc.wantNode)
				}
			} else if tc.wantNode != "" {
				t.Errorf("no result, want node %q", tc.wantNode)
			}
		})
	}
}

// TestMayHelp: a pod rejected by plugins is retried on an event one of them registered; a rejection by a
// plugin registering nothing, or by no plugin, is retried on anything.
func TestMayHelp(t *testing.T) {
	f := &Framework{}
	f.RegisterEvents([]Plugin{
		&fakePlugin{name: "ports", events: []ClusterEvent{{Resource: EventPod, ActionType: Delete}, {Resource: EventNode, ActionType: Add}}},
		&fakePlugin{name: "taints", events: []ClusterEvent{{Resource: EventNode, ActionType: Add | UpdateNodeTaint}}},
		bareFilter{name: "bare"},
	})
	tests := []struct {
		rejectors []string
		ev        ClusterEvent
		want      bool
	}{
		{nil, ClusterEvent{Resource: EventNamespace, ActionType: UpdatePodLabel}, true},
		{[]string{"ports"}, ClusterEvent{Resource: EventPod, ActionType: Delete}, true},
		{[]string{"ports"}, ClusterEvent{Resource: EventPod, ActionType: Add}, false},
		{[]string{"ports"}, ClusterEvent{Resource: EventNode, ActionType: UpdateNodeTaint}, false},
		{[]string{"taints"}, ClusterEvent{Resource: EventNode, ActionType: UpdateNodeTaint}, true},
		{[]string{"taints"}, ClusterEvent{Resource: EventNode, ActionType: UpdateNodeTaint | UpdateNodeLabel}, true},
		{[]string{"taints"}, ClusterEvent{Resource: EventPod, ActionType: UpdateNodeTaint}, false},
		{[]string{"ports", "taints"}, ClusterEvent{Resource: EventNode, ActionType: UpdateNodeTaint}, true},
		{[]string{"bare"}, ClusterEvent{Resource: EventPod, ActionType: UpdatePodLabel}, true},
		{[]string{"unregistered"}, ClusterEvent{Resource: EventPod, ActionType: UpdatePodLabel}, true},
	}
	for _, tc := range tests {
		if got := f.MayHelp(sets.New(tc.rejectors...), tc.ev); got != tc.want {
			t.Errorf("MayHelp(%v, %+v) = %v, want %v", tc.rejectors, tc.ev, got, tc.want)
		}
	}
}

type counter struct{ n int }

func (c *counter) Clone() StateData { return &counter{n: c.n} }

func TestCycleStateClone(t *testing.T) {
	s := NewCycleState()
	s.Write("a", &counter{n: 1})
	c := s.Clone()
	d, _ := c.Read("a")
	d.(*counter).n = 2
	c.Write("b", &counter{})
	if d, _ := s.Read("a"); d.(*counter).n != 1 {
		t.Errorf("original data changed through a clone: %d", d.(*counter).n)
	}
	if _, ok := s.Read("b"); ok {
		t.Error("a clone's write reached the original")
	}
}

func TestStatus(t *testing.T) {
	var nilStatus *Status
	if !nilStatus.IsSuccess() || nilStatus.Code() != Success || nilStatus.Err() != nil || nilStatus.Message() != "" || nilStatus.Plugin() != "" {
		t.Error("a nil status is not a plain success")
	}
	if nilStatus.WithPlugin("x") != nil {
		t.Error("WithPlugin on nil made a status")
	}
	if AsStatus(nil) != nil {
		t.Error("AsStatus(nil) is not nil")
	}
	s := NewStatus(Unschedulable, "Insufficient cpu", "Insufficient memory").WithPlugin("NodeResourcesFit")
	if !s.IsRejected() || s.IsSkip() || s.Message() != "Insufficient cpu, Insufficient memory" || s.Err().Error() != s.Message() {
		t.Errorf("status %+v: message %q err %v", s, s.Message(), s.Err())
	}
	for code, rejected := range map[Code]bool{Success: false, Unschedulable: true, UnschedulableAndUnresolvable: true, Error: false, Skip: false} {
		if got := NewStatus(code).IsRejected(); got != rejected {
			t.Errorf("code %d: IsRejected %v, want %v", code, got, rejected)
		}
	}
	err := fmt.Errorf("wrapped")
	if AsStatus(err).Err() != err || AsStatus(err).Code() != Error {
		t.Error("AsStatus does not keep the error")
	}
}

type counterData struct{ n int }

func (d *counterData) Clone() StateData { return &counterData{n: d.n} }

// TestCycleStateCloneIsIndependent: a clone has every value (cloned) and the filters chosen by PreFilter; writes
// and changes to either side do not show in the other.
func TestCycleStateCloneIsIndependent(t *testing.T) {
	s := NewCycleState()
	if _, ok := s.Read("x"); ok {
		t.Fatal("an empty state reads a value")
	}
	s.Write("x", &counterData{n: 1})
	s.filters, s.filtersSet = []FilterPlugin{bareFilter{}}, true
	c := s.Clone()
	d, ok := c.Read("x")
	if !ok || d.(*counterData).n != 1 || !c.filtersSet || len(c.filters) != 1 {
		t.Fatalf("clone: x %v %v, filters %v %v", d, ok, c.filters, c.filtersSet)
	}
	d.(*counterData).n = 2
	c.Write("y", &counterData{n: 3})
	s.Write("z", &counterData{n: 4})
	if x, _ := s.Read("x"); x.(*counterData).n != 1 {
		t.Fatalf("changing the clone's x changed the original's: %d", x.(*counterData).n)
	}
	if _, ok := s.Read("y"); ok {
		t.Fatal("a write to the clone shows in the original")
	}
	if _, ok := c.Read("z"); ok {
		t.Fatal("a write to the original shows in the clone")
	}
}
