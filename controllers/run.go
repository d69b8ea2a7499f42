package controllers

import (
	"context"
	"sync"
)

// Run runs every controller until ctx ends (the server calls it while it holds the controller lease).
func Run(ctx context.Context, d Deps) {
	if d.Events == nil {
		d.Events = NewEvents(d)
		defer d.Events.Close()
	}
	var wg sync.WaitGroup
	wg.Go(func() { RunServiceAccounts(ctx, d) })
	wg.Go(func() { RunRootCAPublisher(ctx, d) })
	wg.Go(func() { RunNamespaces(ctx, d) })
	wg.Go(func() { RunGarbageCollector(ctx, d) })
	wg.Go(func() { RunReplicaSets(ctx, d) })
	wg.Go(func() { RunDeployments(ctx, d) })
	wg.Go(func() { RunNodeLifecycle(ctx, d) })
	wg.Go(func() { RunNodeIPAM(ctx, d) })
	wg.Go(func() { RunEndpointSlices(ctx, d) })
	wg.Go(func() { RunEndpoints(ctx, d) })
	wg.Wait()
}
