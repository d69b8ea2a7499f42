package live_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wheelhouse-dev/wheelhouse/web/live"
)

func TestSubscriptionRendersAtOnce(t *testing.T) {
	t.Parallel()
	pods := newRegion("<tr>web-1</tr>")
	h := start(t, setup{regions: map[string]*fakeRegion{"pods": pods}})
	h.sub("a", "pods")
	h.expect(frag("a", 1, "<tr>web-1</tr>"))
	equal(t, "renders", pods.renderCount(), 1)
}

func TestBurstOfChangesIsOneRenderOfTheLatestState(t *testing.T) {
	t.Parallel()
	pods := newRegion("<p>0</p>")
	h := start(t, setup{regions: map[string]*fakeRegion{"pods": pods}})
	h.sub("a", "pods")
	h.expect(frag("a", 1, "<p>0</p>"))
	changed := pods.changed(t, 1)

	for i := 1; i <= 1000; i++ {
		pods.set(fmt.Sprintf("<p>%d</p>", i))
		changed()
	}
	h.clock.waitTimer(t, interval) // the region waits for its interval to pass
	equal(t, "renders before the interval passed", pods.renderCount(), 1)
	h.clock.Step(interval)
	h.expect(frag("a", 2, "<p>1000</p>"))

	if got := h.settle(); len(got) != 0 {
		t.Errorf("after the coalesced fragment: %+v, want nothing", got)
	}
	equal(t, "renders", pods.renderCount(), 2)
	equal(t, "coalescing timers", h.clock.askedFor(interval), 1)
}

func TestSeqGrowsPerRegionAndRegionsAreIndependent(t *testing.T) {
	t.Parallel()
	pods, nodes := newRegion("p1"), newRegion("n1")
	h := start(t, setup{regions: map[string]*fakeRegion{"pods": pods, "nodes": nodes}})
	h.sub("a", "pods")
	h.sub("b", "nodes")
	got := h.readFrags(2)
	equal(t, "first fragment of a", got["a"], frag("a", 1, "p1"))
	equal(t, "first fragment of b", got["b"], frag("b", 1, "n1"))
	podsChanged, nodesChanged := pods.changed(t, 1), nodes.changed(t, 1)

	for seq := uint64(2); seq <= 4; seq++ {
		html := fmt.Sprintf("p%d", seq)
		pods.set(html)
		h.clock.Step(interval) // due at once: no coalescing wait
		podsChanged()
		h.expect(frag("a", seq, html))
	}
	nodes.set("n2")
	nodesChanged()
	h.expect(frag("b", 2, "n2"))
	equal(t, "pods renders", pods.renderCount(), 4)
	equal(t, "nodes renders", nodes.renderCount(), 2)
}

func TestRenderGoneEndsTheSubscription(t *testing.T) {
	t.Parallel()
	pods := newRegion("p1")
	h := start(t, setup{regions: map[string]*fakeRegion{"pods": pods}})
	h.sub("a", "pods")
	h.expect(frag("a", 1, "p1"))
	changed := pods.changed(t, 1)

	pods.fail(fmt.Errorf("authorizing: %w", &live.Gone{Reason: "You may no longer list pods."}))
	h.clock.Step(interval)
	changed()
	h.expect(gone("a", "You may no longer list pods."))
	eventually(t, "the watch to end", func() bool { return pods.watching() == 0 })

	pods.set("p2")
	changed()
	h.clock.Step(interval)
	changed()
	if got := h.settle(); len(got) != 0 {
		t.Errorf("after gone: %+v, want nothing", got)
	}
	equal(t, "renders", pods.renderCount(), 2)
}

func TestRenderErrorIsRetriedLater(t *testing.T) {
	t.Parallel()
	pods := newRegion("p1")
	h := start(t, setup{regions: map[string]*fakeRegion{"pods": pods}})
	h.sub("a", "pods")
	h.expect(frag("a", 1, "p1"))
	changed := pods.changed(t, 1)

	pods.fail(errors.New("watch cache not synced"))
	pods.set("p2")
	h.clock.Step(interval)
	changed()
	pods.waitRenders(t, 2)

	h.clock.Step(interval) // a retry waits longer than a change does
	if got := h.settle(); len(got) != 0 {
		t.Errorf("before the retry: %+v, want nothing", got)
	}
	equal(t, "renders before the retry", pods.renderCount(), 2)
	h.clock.Step(time.Minute)
	h.expect(frag("a", 2, "p2"))
	equal(t, "renders", pods.renderCount(), 3)
}

func TestResolverErrorSaysGone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, kind, params, reason string
	}{
		{"a Gone gives its reason", "denied", "You may not see secrets.", "You may not see secrets."},
		{"another error gives the generic reason", "broken", "", "this part of the page is not available"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pods := newRegion("p1")
			h := start(t, setup{regions: map[string]*fakeRegion{"pods": pods}})
			h.send(msg{T: "sub", ID: "x", Region: tc.kind, Params: tc.params})
			h.expect(gone("x", tc.reason))
			h.sub("a", "pods") // the connection goes on
			h.expect(frag("a", 1, "p1"))
		})
	}
}

func TestPausedTabRendersNothingUntilResumed(t *testing.T) {
	t.Parallel()
	pods := newRegion("p1")
	h := start(t, setup{regions: map[string]*fakeRegion{"pods": pods}})
	h.sub("a", "pods")
	h.expect(frag("a", 1, "p1"))
	changed := pods.changed(t, 1)

	h.send(msg{T: "pause"})
	if got := h.sync(); len(got) != 0 {
		t.Fatalf("after pause: %+v, want nothing", got)
	}
	for _, html := range []string{"p2", "p3"} {
		pods.set(html)
		changed()
	}
	h.clock.Step(interval)
	if got := h.sync(); len(got) != 0 {
		t.Errorf("while paused: %+v, want nothing", got)
	}
	equal(t, "renders while paused", pods.renderCount(), 1)
	equal(t, "watches while paused", pods.watching(), 1)

	h.send(msg{T: "resume"})
	h.expect(frag("a", 2, "p3"))
	if got := h.settle(); len(got) != 0 {
		t.Errorf("after the resumed render: %+v, want nothing", got)
	}
	equal(t, "renders", pods.renderCount(), 2)
}

func TestUnsubscribeStopsRenders(t *testing.T) {
	t.Parallel()
	pods := newRegion("p1")
	h := start(t, setup{regions: map[string]*fakeRegion{"pods": pods}})
	h.sub("a", "pods")
	h.expect(frag("a", 1, "p1"))
	changed := pods.changed(t, 1)

	h.unsub("a")
	eventually(t, "the watch to end", func() bool { return pods.watching() == 0 })
	h.clock.Step(interval)
	changed()
	if got := h.settle(); len(got) != 0 {
		t.Errorf("after unsub: %+v, want nothing", got)
	}
	equal(t, "renders", pods.renderCount(), 1)
}

// fakeCheck is Options.Check: it fails once the test sets err.
type fakeCheck struct {
	mu    sync.Mutex
	err   error
	calls int
}

func (c *fakeCheck) check(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	return c.err
}

func (c *fakeCheck) set(err error) {
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
}

func (c *fakeCheck) callCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

func TestFailingCheckEndsTheConnectionWithBye(t *testing.T) {
	t.Parallel()
	signedOut := &live.Gone{Reason: "You have been signed out."}
	for _, tc := range []struct {
		name    string
		err     error
		atStart bool
		reason  string
	}{
		{"at the start, with a Gone's reason", signedOut, true, signedOut.Reason},
		{"at the start, with another error", errors.New("session store down"), true, "disconnected"},
		{"at a later check", signedOut, false, signedOut.Reason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			check := &fakeCheck{}
			if tc.atStart {
				check.set(tc.err)
			}
			pods := newRegion("p1")
			h := start(t, setup{opts: live.Options{Check: check.check},
				regions: map[string]*fakeRegion{"pods": pods}})
			if !tc.atStart {
				h.sub("a", "pods")
				h.expect(frag("a", 1, "p1"))
				h.clock.waitTimer(t, checkEvery)
				h.clock.Step(checkEvery) // passes: the connection goes on
				eventually(t, "the next check", func() bool { return h.clock.askedFor(checkEvery) == 2 })
				equal(t, "checks", check.callCount(), 2)
				check.set(tc.err)
				h.clock.Step(checkEvery)
			}
			h.expect(msg{T: "bye", Reason: tc.reason})
			h.expectClosed()
			if err := h.end(); !errors.Is(err, tc.err) {
				t.Errorf("Serve returned %v, want %v", err, tc.err)
			}
			equal(t, "watches after Serve returned", pods.watching(), 0)
		})
	}
}

func TestSlowTabIsDisconnected(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", bigHTML)
	t.Run("fragments past MaxQueued", func(t *testing.T) {
		t.Parallel()
		regions := map[string]*fakeRegion{}
		for _, kind := range []string{"pods", "nodes", "events"} {
			regions[kind] = newRegion(big)
		}
		// The writer blocks on the first fragment (the tab reads nothing); the next two exceed the bound.
		h := start(t, setup{opts: live.Options{MaxQueued: bigHTML * 3 / 2, WriteTimeout: time.Hour},
			regions: regions, smallBuffers: true})
		for kind := range regions {
			h.sub(kind, kind)
		}
		if err := h.end(); !errors.Is(err, live.ErrTooSlow) {
			t.Errorf("Serve returned %v, want ErrTooSlow", err)
		}
		h.expectClosed()
	})
	t.Run("pongs it does not read", func(t *testing.T) {
		t.Parallel()
		pods := newRegion(big)
		h := start(t, setup{opts: live.Options{MaxRegions: 1, WriteTimeout: time.Hour},
			regions: map[string]*fakeRegion{"pods": pods}, smallBuffers: true})
		h.sub("a", "pods")
		pods.waitRenders(t, 1)
		for i := 0; i < 10_000; i++ { // far more than a connection with one region lets wait
			if err := h.ws.WriteJSON(msg{T: "ping"}); err != nil {
				break // closed
			}
		}
		if err := h.end(); !errors.Is(err, live.ErrTooSlow) {
			t.Errorf("Serve returned %v, want ErrTooSlow", err)
		}
	})
}

func TestUnknownMessageEndsTheConnection(t *testing.T) {
	t.Parallel()
	pods := newRegion("p1")
	h := start(t, setup{regions: map[string]*fakeRegion{"pods": pods}})
	h.sub("a", "pods")
	h.expect(frag("a", 1, "p1"))
	h.send(msg{T: "subscribe", ID: "b", Region: "pods"})
	h.expectClosed()
	if err := h.end(); !errors.Is(err, live.ErrBadMessage) {
		t.Errorf("Serve returned %v, want ErrBadMessage", err)
	}
	equal(t, "watches after Serve returned", pods.watching(), 0)
}

func TestMaxRegionsBoundsSubscriptions(t *testing.T) {
	t.Parallel()
	regions := map[string]*fakeRegion{"pods": newRegion("p"), "nodes": newRegion("n"), "events": newRegion("e")}
	h := start(t, setup{opts: live.Options{MaxRegions: 2}, regions: regions})
	h.sub("a", "pods")
	h.sub("b", "nodes")
	h.readFrags(2)
	h.sub("c", "events")
	h.expect(gone("c", "too many live regions on this page"))
	h.sub("a", "pods") // replaces a: still two
	h.expect(frag("a", 1, "p"))
	h.unsub("b")
	h.sub("c", "events")
	h.expect(frag("c", 1, "e"))
}

func TestUnsubscribeDropsTheQueuedFragment(t *testing.T) {
	t.Parallel()
	big, pods, nodes := newRegion(strings.Repeat("x", bigHTML)), newRegion("p1"), newRegion("n1")
	h := start(t, setup{regions: map[string]*fakeRegion{"big": big, "pods": pods, "nodes": nodes},
		smallBuffers: true})
	h.sub("big", "big") // the tab reads nothing yet: the writer blocks on this fragment
	big.waitRenders(t, 1)
	h.sub("a", "pods")
	pods.waitRenders(t, 1)
	h.sub("b", "nodes")
	nodes.waitRenders(t, 1) // rendered in a later pass than a: a's fragment is queued behind big's
	h.unsub("a")
	h.send(msg{T: "ping"})

	// Now the tab reads: big's fragment, the pong and b's fragment arrive; a's would have come before b's.
	var got []string
	for !slices.Contains(got, "frag b 1") || !slices.Contains(got, "pong  0") {
		m := h.read()
		got = append(got, fmt.Sprintf("%s %s %d", m.T, m.ID, m.Seq))
	}
	slices.Sort(got)
	if diff := cmp.Diff([]string{"frag b 1", "frag big 1", "pong  0"}, got); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	equal(t, "pods renders", pods.renderCount(), 1)
}

func TestGoneFromAReplacedSubscriptionLeavesTheNewOneAlone(t *testing.T) {
	t.Parallel()
	old, replacement := newRegion("old"), newRegion("new")
	h := start(t, setup{regions: map[string]*fakeRegion{"old": old, "new": replacement}})
	old.fail(&live.Gone{Reason: "You may no longer see this."})
	release := old.block()
	h.sub("a", "old")
	old.waitRenders(t, 1)
	h.sub("a", "new") // while the old subscription's render is in flight
	if got := h.sync(); len(got) != 0 {
		t.Fatalf("after the new subscription: %+v, want nothing", got)
	}
	release()
	h.expect(frag("a", 1, "new"))

	changed := replacement.changed(t, 1) // the new subscription lives on
	replacement.set("newer")
	h.clock.Step(interval)
	changed()
	h.expect(frag("a", 2, "newer"))
}

func TestRetryTimerDoesNotHoldBackAnotherRegion(t *testing.T) {
	t.Parallel()
	pods, nodes := newRegion("p1"), newRegion("n1")
	h := start(t, setup{regions: map[string]*fakeRegion{"pods": pods, "nodes": nodes}})
	h.sub("a", "pods")
	h.sub("b", "nodes")
	h.readFrags(2)
	podsChanged, nodesChanged := pods.changed(t, 1), nodes.changed(t, 1)
	h.clock.Step(interval)

	nodes.set("n2")
	nodesChanged()
	h.expect(frag("b", 2, "n2")) // nodes waits an interval from now on
	pods.fail(errors.New("watch cache not synced"))
	podsChanged()
	h.clock.waitPending(t, 1) // pods waits for its retry, longer than an interval
	equal(t, "pods renders", pods.renderCount(), 2)

	nodes.set("n3")
	nodesChanged()
	h.clock.waitTimer(t, interval)
	h.clock.Step(interval)
	h.expect(frag("b", 3, "n3"))
}

func TestBrokenWatchIsRestartedAndItsRegionRendered(t *testing.T) {
	t.Parallel()
	pods := newRegion("p1")
	h := start(t, setup{regions: map[string]*fakeRegion{"pods": pods}})
	h.sub("a", "pods")
	h.expect(frag("a", 1, "p1"))
	pods.changed(t, 1)

	pods.set("p2")
	pods.broken <- errors.New("watch expired")
	h.clock.waitPending(t, 2) // the restart, and the render: what the region shows may have changed unseen
	h.clock.Step(interval)
	h.expect(frag("a", 2, "p2"))
	h.clock.Step(time.Minute)
	changed := pods.changed(t, 2)
	equal(t, "watches", pods.watching(), 1)

	pods.set("p3")
	changed()
	h.expect(frag("a", 3, "p3"))
}

func TestCheckAskingForARefreshRendersEveryRegion(t *testing.T) {
	t.Parallel()
	check := &fakeCheck{}
	check.set(live.ErrRefresh) // at the start too: it must not end the connection
	pods, nodes := newRegion("p1"), newRegion("n1")
	h := start(t, setup{opts: live.Options{Check: check.check},
		regions: map[string]*fakeRegion{"pods": pods, "nodes": nodes}})
	h.sub("a", "pods")
	h.expect(frag("a", 1, "p1"))
	h.sub("b", "nodes")
	h.expect(frag("b", 1, "n1"))
	pods.set("p2")
	nodes.set("n2")
	h.clock.waitTimer(t, checkEvery)
	h.clock.Step(checkEvery)
	got := h.readFrags(2)
	equal(t, "pods after the refresh", got["a"], frag("a", 2, "p2"))
	equal(t, "nodes after the refresh", got["b"], frag("b", 2, "n2"))
}

func TestFragmentHTMLIsSentAsIs(t *testing.T) {
	t.Parallel()
	html := `<tr data-name="a&b"><td>"quoted" <b>x</b> \ é</td></tr>`
	pods := newRegion(html)
	h := start(t, setup{regions: map[string]*fakeRegion{"pods": pods}})
	h.sub("a", "pods")
	h.expect(frag("a", 1, html))
	// The same bytes for another region are quoted once and sent to each.
	h.sub("b", "pods")
	h.expect(frag("b", 1, html))
}
