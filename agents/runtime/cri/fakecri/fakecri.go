// Package fakecri is an in-process CRI v1 server for the error paths a real containerd cannot be made to show on
// demand: it serves a runtime.Runtime (agents/runtime/fake, usually) and an in-memory image store over gRPC on a
// unix socket, and can fail or slow any method, fail pulls of an image, or go down and come back on the same
// socket. The cri package's client talks to it exactly as to containerd.
package fakecri

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
)

// Server is a CRI server. Its methods are safe for concurrent use.
type Server struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	// Socket is the unix socket it listens on (the cri client's endpoint: "unix://" + Socket).
	Socket string
	rt     runtime.Runtime

	mu       sync.Mutex
	srv      *grpc.Server
	images   map[string]*runtimeapi.Image // by every name and the ID
	pullErrs map[string]error
	fails    map[string]error
	delays   map[string]time.Duration
	pulls    []Pull
	// pullsInFlight counts the PullImage calls in progress; maxPullsInFlight is its highest.
	pullsInFlight, maxPullsInFlight int
	calls                           []string
	netReady                        bool
	nextID                          int // image IDs are never reused
}

// Pull is a PullImage call as the server saw it.
type Pull struct {
	Image string
	Auth  *runtimeapi.AuthConfig
}

// Start serves rt on a fresh socket until the test ends.
func Start(t testing.TB, rt runtime.Runtime) *Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "fakecri")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &Server{Socket: filepath.Join(dir, "cri.sock"), rt: rt, images: map[string]*runtimeapi.Image{},
		pullErrs: map[string]error{}, fails: map[string]error{}, delays: map[string]time.Duration{}, netReady: true}
	if err := s.Up(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Down)
	return s
}

// Endpoint is the server's address for the cri client.
func (s *Server) Endpoint() string { return "unix://" + s.Socket }

// Up starts serving (again, after Down) on the socket.
func (s *Server) Up() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return nil
	}
	_ = os.Remove(s.Socket)
	l, err := net.Listen("unix", s.Socket)
	if err != nil {
		return fmt.Errorf("fakecri: listen: %w", err)
	}
	// A listener closed late (a Serve that starts after Down's Stop closes it) must not unlink the socket of the
	// next Up.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	srv := grpc.NewServer(grpc.UnaryInterceptor(s.intercept))
	runtimeapi.RegisterRuntimeServiceServer(srv, s)
	runtimeapi.RegisterImageServiceServer(srv, s)
	s.srv = srv
	go func() { _ = srv.Serve(l) }()
	return nil
}

// Down stops serving, as a runtime that crashed: calls fail with Unavailable until Up.
func (s *Server) Down() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.Stop()
	}
}

// Fail makes every call of method (its CRI name: "RunPodSandbox", "PullImage", ...) fail with err; nil clears it.
func (s *Server) Fail(method string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		delete(s.fails, method)
	} else {
		s.fails[method] = err
	}
}

// Delay makes every call of method take at least d longer (0 clears it); the caller's deadline still applies.
func (s *Server) Delay(method string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delays[method] = d
}

// FailPull makes pulls of image fail with err (nil: they succeed and add the image).
func (s *Server) FailPull(image string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		delete(s.pullErrs, image)
	} else {
		s.pullErrs[image] = err
	}
}

// SetNetworkReady sets the NetworkReady condition Status reports.
func (s *Server) SetNetworkReady(ready bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.netReady = ready
}

// AddImage makes the server have an image (as if pulled earlier) of the given size.
func (s *Server) AddImage(ref string, size uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addLocked(ref, size)
}

// SetImageUser makes the server have an image (as AddImage, 1 MiB when new) whose configuration runs as uid
// (nil: no numeric user) or, without one, as the user name username, as ImageStatus reports an image's user.
func (s *Server) SetImageUser(ref string, uid *int64, username string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	img := s.addLocked(ref, 1<<20)
	img.Uid, img.Username = nil, username
	if uid != nil {
		img.Uid = &runtimeapi.Int64Value{Value: *uid}
	}
}

func (s *Server) addLocked(ref string, size uint64) *runtimeapi.Image {
	if img, ok := s.images[ref]; ok {
		return img
	}
	s.nextID++
	img := &runtimeapi.Image{Id: "sha256:" + fmt.Sprintf("%064x", s.nextID), RepoTags: []string{ref}, Size: size,
		Spec: &runtimeapi.ImageSpec{Image: ref}}
	s.images[ref], s.images[img.Id] = img, img
	return img
}

// Pulls are the PullImage calls so far.
func (s *Server) Pulls() []Pull {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.pulls)
}

// MaxPullsInFlight is the most PullImage calls that were in progress at once (Delay makes them last).
func (s *Server) MaxPullsInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxPullsInFlight
}

// Calls are the methods called so far, in order.
func (s *Server) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func (s *Server) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	method := info.FullMethod[strings.LastIndex(info.FullMethod, "/")+1:]
	s.mu.Lock()
	s.calls = append(s.calls, method)
	err, delay := s.fails[method], s.delays[method]
	if method == "PullImage" {
		s.pullsInFlight++
		s.maxPullsInFlight = max(s.maxPullsInFlight, s.pullsInFlight)
		defer func() {
			s.mu.Lock()
			s.pullsInFlight--
			s.mu.Unlock()
		}()
	}
	s.mu.Unlock()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-t.C:
		}
	}
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// The RuntimeService, served by the runtime.

func (s *Server) Version(ctx context.Context, req *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return s.rt.Version(ctx, req.Version)
}

func (s *Server) RunPodSandbox(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	id, err := s.rt.RunPodSandbox(ctx, req.Config, req.RuntimeHandler)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

func (s *Server) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	return &runtimeapi.StopPodSandboxResponse{}, s.rt.StopPodSandbox(ctx, req.PodSandboxId)
}

func (s *Server) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	return &runtimeapi.RemovePodSandboxResponse{}, s.rt.RemovePodSandbox(ctx, req.PodSandboxId)
}

func (s *Server) PodSandboxStatus(ctx context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	return s.rt.PodSandboxStatus(ctx, req.PodSandboxId, req.Verbose)
}

func (s *Server) ListPodSandbox(ctx context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	items, err := s.rt.ListPodSandbox(ctx, req.Filter)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListPodSandboxResponse{Items: items}, nil
}

func (s *Server) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	// containerd's own check: a group needs a user to go with it.
	if sc := req.GetConfig().GetLinux().GetSecurityContext(); sc.GetRunAsGroup() != nil && sc.GetRunAsUser() == nil && sc.GetRunAsUsername() == "" {
		return nil, status.Error(codes.Unknown, "failed to generate user string: user group is specified without user")
	}
	id, err := s.rt.CreateContainer(ctx, req.PodSandboxId, req.Config, req.SandboxConfig)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, nil
}

func (s *Server) StartContainer(ctx context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	return &runtimeapi.StartContainerResponse{}, s.rt.StartContainer(ctx, req.ContainerId)
}

func (s *Server) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	return &runtimeapi.StopContainerResponse{}, s.rt.StopContainer(ctx, req.ContainerId, req.Timeout)
}

func (s *Server) RemoveContainer(ctx context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	return &runtimeapi.RemoveContainerResponse{}, s.rt.RemoveContainer(ctx, req.ContainerId)
}

func (s *Server) ListContainers(ctx context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	cs, err := s.rt.ListContainers(ctx, req.Filter)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListContainersResponse{Containers: cs}, nil
}

func (s *Server) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	return s.rt.ContainerStatus(ctx, req.ContainerId, req.Verbose)
}

func (s *Server) UpdateContainerResources(ctx context.Context, req *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	if err := s.rt.UpdateContainerResources(ctx, req.ContainerId, &runtimeapi.ContainerResources{Linux: req.Linux}); err != nil {
		return nil, err
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

// ExecSync answers as containerd does: the exit code in the response, a timeout as DeadlineExceeded.
func (s *Server) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	stdout, stderr, err := s.rt.ExecSync(ctx, req.ContainerId, req.Cmd, time.Duration(req.Timeout)*time.Second)
	var code interface{ ExitStatus() int }
	switch {
	case err == nil:
		return &runtimeapi.ExecSyncResponse{Stdout: stdout, Stderr: stderr}, nil
	case asExit(err, &code):
		return &runtimeapi.ExecSyncResponse{Stdout: stdout, Stderr: stderr, ExitCode: int32(code.ExitStatus())}, nil
	case isTimeout(err):
		return nil, status.Errorf(codes.DeadlineExceeded, "timeout %ds exceeded: %v", req.Timeout, err)
	default:
		return nil, err
	}
}

func (s *Server) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return s.rt.Exec(ctx, req)
}

func (s *Server) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return s.rt.Attach(ctx, req)
}

func (s *Server) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return s.rt.PortForward(ctx, req)
}

// Status reports the runtime ready and the network as SetNetworkReady says.
func (s *Server) Status(ctx context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	s.mu.Lock()
	net := s.netReady
	s.mu.Unlock()
	cond := &runtimeapi.RuntimeCondition{Type: runtimeapi.NetworkReady, Status: net}
	if !net {
		cond.Reason, cond.Message = "NetworkPluginNotReady", "cni plugin not initialized"
	}
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true}, cond}}}, nil
}

// ListContainerStats answers from the runtime when it measures usage, else with none.
func (s *Server) ListContainerStats(ctx context.Context, req *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	sp, ok := s.rt.(runtime.StatsProvider)
	if !ok {
		return &runtimeapi.ListContainerStatsResponse{}, nil
	}
	stats, err := sp.ListContainerStats(ctx, req.Filter)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListContainerStatsResponse{Stats: stats}, nil
}

// The ImageService, in memory.

func (s *Server) ListImages(ctx context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*runtimeapi.Image
	for key, img := range s.images {
		if key == img.Id {
			out = append(out, img)
		}
	}
	slices.SortFunc(out, func(a, b *runtimeapi.Image) int { return strings.Compare(a.Id, b.Id) })
	return &runtimeapi.ListImagesResponse{Images: out}, nil
}

func (s *Server) ImageStatus(ctx context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &runtimeapi.ImageStatusResponse{Image: s.images[req.GetImage().GetImage()]}, nil
}

func (s *Server) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref := req.GetImage().GetImage()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pulls = append(s.pulls, Pull{Image: ref, Auth: req.Auth})
	if err := s.pullErrs[ref]; err != nil {
		return nil, err
	}
	return &runtimeapi.PullImageResponse{ImageRef: s.addLocked(ref, 1<<20).Id}, nil
}

func (s *Server) RemoveImage(ctx context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if img, ok := s.images[req.GetImage().GetImage()]; ok {
		delete(s.images, img.Id)
		for _, tag := range img.RepoTags {
			delete(s.images, tag)
		}
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

// ImageFsInfo reports one filesystem holding the images' total size.
func (s *Server) ImageFsInfo(ctx context.Context, req *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var used uint64
	for key, img := range s.images {
		if key == img.Id {
			used += img.Size
		}
	}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
		Timestamp: time.Now().UnixNano(), FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: "/fake/images"},
		UsedBytes: &runtimeapi.UInt64Value{Value: used}}}}, nil
}

func asExit(err error, target *interface{ ExitStatus() int }) bool { return errors.As(err, target) }

func isTimeout(err error) bool { return errors.Is(err, runtime.ErrCommandTimedOut) }
