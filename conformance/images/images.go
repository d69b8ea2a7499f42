// Package images builds the container images upstream's conformance suite runs (issue 23), because this machine
// cannot pull them from registry.k8s.io: agnhost from its source at the suite's version, the rest from Debian's
// packages on this machine, as OCI images with go-containerregistry. Build returns them under the repository paths
// the suite asks for relative to one registry host, and RepoList is the KUBE_TEST_REPO_LIST file that points the
// suite at that host.
//
// What each image holds, beside upstream's:
//
//   - busybox: Debian's busybox-static with every applet linked in /bin but sh, which is Debian's bash (upstream:
//     the busybox image, glibc build). Debian's busybox is 1.35, whose ash drops environment variables whose names
//     are not shell names (data-1, 1-data-1), which upstream's 1.37 passes on and the suite's env tests read back
//     through `sh -c env`.
//   - agnhost (and its previous version's tag): the agnhost program built from k8s.io/kubernetes at the suite's
//     version, on the busybox tree with the tools its Dockerfile installs from Alpine, here from Debian: dig, curl,
//     nc (netcat-openbsd), socat, ip and ss (iproute2); its user and group, /uploads, porter's certificate.
//     Missing: coredns and iperf (not packaged here) and the fake registry's content under /var/registry.
//   - glibc-dns-testing: the busybox tree with Debian's dig, bash and getent (upstream: debian:bookworm-slim with
//     dnsutils and coredns).
//   - nginx, nginx-new: Debian's nginx binary serving /usr/share/nginx/html on port 80 as the official image does
//     (upstream: nginx 1.27 and 1.28 on Alpine; both tags here are Debian's 1.22, told apart by a file).
//   - kitten, nautilus: agnhost with the picture and data.json from upstream's image sources, running test-webserver.
//   - nonroot: the busybox tree running as user 1234.
//   - nonewprivs: the busybox tree with upstream's nnp program setuid root.
//   - pause: the caller's pause image (Options.Pause).
//
// Not built: sample-apiserver (the aggregator test), resource-consumer, perl, the volume servers, and the images
// of tests outside [Conformance]. docs/conformance.md lists what each missing piece costs.
package images

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// Options says where the pieces come from.
type Options struct {
	// Agnhost is the agnhost program, built from k8s.io/kubernetes at the suite's version (scripts/e2e-test.sh
	// builds it beside e2e.test).
	Agnhost string
	// Nonewprivs is the nnp program of test/images/nonewprivs (scripts/e2e-test.sh builds it too): it prints its
	// effective user, installed setuid root.
	Nonewprivs string
	// KubernetesSource is the k8s.io/kubernetes module's directory at the suite's version, for the files upstream's
	// image sources add (test/images/...).
	KubernetesSource string
	// Nginx is Debian's nginx program (see DebianNginx).
	Nginx string
	// Pause is the pause image.
	Pause v1.Image
}

// Image is one built image and the repository path and tag, relative to the registry host, the suite asks for.
type Image struct {
	Ref   string // e.g. "e2e-test-images/agnhost:2.66.1"
	Image v1.Image
}

// Versions, as the suite's test/utils/image/manifest.go names them in v1.37.2.
const (
	agnhostVersion     = "2.66.1"
	agnhostPrevVersion = "2.55"
	busyboxVersion     = "1.37.0-2"
	glibcDNSVersion    = "2.1.1"
	nginxVersion       = "1.27.0-2"
	nginxNewVersion    = "1.28.0-2"
	kittenVersion      = "1.8"
	nautilusVersion    = "1.8"
	nonRootVersion     = "1.5"
	nonewprivsVersion  = "1.4"
	pauseVersion       = "3.10.2"
)

// promoterE2E is the repository path of the suite's own images on the registry host (see RepoList); the pause
// image sits at the top, as on registry.k8s.io.
const promoterE2E = "e2e-test-images"

// Program paths on this machine, found on the PATH: the tools the agnhost and DNS images carry.
var tools = []struct{ name, dst string }{
	{"dig", "/usr/bin/dig"},
	{"curl", "/usr/bin/curl"},
	{"nc", "/usr/bin/nc"},
	{"socat", "/usr/bin/socat"},
	{"ip", "/usr/sbin/ip"},
	{"ss", "/usr/bin/ss"},
	{"getent", "/usr/bin/getent"},
}

// Packages is what the images need installed on this machine (Debian package names), for the install scripts.
var Packages = []string{"busybox-static", "bind9-dnsutils", "curl", "netcat-openbsd", "socat", "bash", "iproute2", "libc-bin"}

const pathEnv = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Build builds every image. It reads host programs and files only; nothing is pushed.
func Build(ctx context.Context, opts Options) ([]Image, error) {
	if opts.Pause == nil || opts.Agnhost == "" || opts.Nonewprivs == "" || opts.KubernetesSource == "" || opts.Nginx == "" {
		return nil, fmt.Errorf("images: Options needs Agnhost, Nonewprivs, KubernetesSource, Nginx and Pause")
	}
	base, err := busyboxTree(ctx)
	if err != nil {
		return nil, err
	}
	baseLayer, err := base.layer()
	if err != nil {
		return nil, err
	}
	toolsTree := tree{}
	for _, tl := range tools {
		src, err := exec.LookPath(tl.name)
		if err != nil {
			return nil, fmt.Errorf("images: %s is not installed (Debian packages: %s)", tl.name, strings.Join(Packages, " "))
		}
		if src, err = filepath.EvalSymlinks(src); err != nil {
			return nil, fmt.Errorf("images: %w", err)
		}
		if err := toolsTree.addProgram(ctx, tl.dst, src); err != nil {
			return nil, err
		}
	}
	toolsTree.file("/etc/nsswitch.conf", 0o644, []byte("passwd: files\ngroup: files\nhosts: files dns\n"))
	toolsLayer, err := toolsTree.layer()
	if err != nil {
		return nil, err
	}

	busybox, err := image(config{cmd: []string{"sh"}}, baseLayer)
	if err != nil {
		return nil, err
	}

	agnTree := tree{}
	agnTree.hostFile("/agnhost", 0o755, opts.Agnhost)
	agnTree.symlink("/agnhost-2", "agnhost")
	agnTree.dir("/uploads", 0o755)
	porter := filepath.Join(opts.KubernetesSource, "test/images/agnhost/porter")
	agnTree.hostFile("/localhost.crt", 0o644, filepath.Join(porter, "localhost.crt"))
	agnTree.hostFile("/localhost.key", 0o644, filepath.Join(porter, "localhost.key"))
	// The Dockerfile's adduser/addgroup: user-defined-in-image (1000) in group-defined-in-image (50000), for the
	// SupplementalGroups tests.
	agnTree.file("/etc/passwd", 0o644, []byte(passwd+"user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n"))
	agnTree.file("/etc/group", 0o644, []byte(group+"user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n"))
	agnTree.dir("/home/user-defined-in-image", 0o755)
	agnLayer, err := agnTree.layer()
	if err != nil {
		return nil, err
	}
	agnConfig := config{entrypoint: []string{"/agnhost"}, cmd: []string{"pause"}, ports: []string{"80", "8080", "8081", "9376", "5000"}}
	agnhost, err := image(agnConfig, baseLayer, toolsLayer, agnLayer)
	if err != nil {
		return nil, err
	}

	webImage := func(name string) (v1.Image, error) {
		html := filepath.Join(opts.KubernetesSource, "test/images", name, "html")
		t := tree{}
		t.hostFile("/"+name+".jpg", 0o644, filepath.Join(html, name+".jpg"))
		t.hostFile("/data.json", 0o644, filepath.Join(html, "data.json"))
		l, err := t.layer()
		if err != nil {
			return nil, err
		}
		c := agnConfig
		c.cmd = []string{"test-webserver"}
		return image(c, baseLayer, toolsLayer, agnLayer, l)
	}
	kitten, err := webImage("kitten")
	if err != nil {
		return nil, err
	}
	nautilus, err := webImage("nautilus")
	if err != nil {
		return nil, err
	}

	dns, err := image(config{cmd: []string{"bash"}}, baseLayer, toolsLayer)
	if err != nil {
		return nil, err
	}

	nginxImage := func(version string) (v1.Image, error) {
		t, err := nginxTree(ctx, opts.Nginx, version)
		if err != nil {
			return nil, err
		}
		l, err := t.layer()
		if err != nil {
			return nil, err
		}
		return image(config{cmd: []string{"nginx", "-g", "daemon off;"}, ports: []string{"80"}, stopSignal: "SIGQUIT"}, baseLayer, l)
	}
	nginx, err := nginxImage(nginxVersion)
	if err != nil {
		return nil, err
	}
	nginxNew, err := nginxImage(nginxNewVersion)
	if err != nil {
		return nil, err
	}

	nonRoot, err := image(config{cmd: []string{"sh"}, user: "1234"}, baseLayer)
	if err != nil {
		return nil, err
	}

	// The Dockerfile's: nnp setuid root on the base, so only no_new_privs keeps a non-root user non-root.
	nnpTree := tree{}
	nnpTree.hostFile("/usr/local/bin/nnp", 0o4755, opts.Nonewprivs)
	nnpLayer, err := nnpTree.layer()
	if err != nil {
		return nil, err
	}
	nonewprivs, err := image(config{cmd: []string{"nnp"}}, baseLayer, nnpLayer)
	if err != nil {
		return nil, err
	}

	e2e := func(name, version string) string { return promoterE2E + "/" + name + ":" + version }
	out := []Image{
		{e2e("agnhost", agnhostVersion), agnhost},
		{e2e("agnhost", agnhostPrevVersion), agnhost},
		{e2e("busybox", busyboxVersion), busybox},
		{e2e("glibc-dns-testing", glibcDNSVersion), dns},
		{e2e("nginx", nginxVersion), nginx},
		{e2e("nginx", nginxNewVersion), nginxNew},
		{e2e("kitten", kittenVersion), kitten},
		{e2e("nautilus", nautilusVersion), nautilus},
		{e2e("nonroot", nonRootVersion), nonRoot},
		{e2e("nonewprivs", nonewprivsVersion), nonewprivs},
		{"pause:" + pauseVersion, opts.Pause},
	}
	return out, nil
}

// RepoList is the KUBE_TEST_REPO_LIST file (YAML, the suite's RegistryList) that names host, with the paths Build
// uses, for every registry the suite pulls from; the invalid registry stays invalid, as its tests need.
func RepoList(host string) string {
	return fmt.Sprintf(`promoterE2eRegistry: %[1]s/%[2]s
buildImageRegistry: %[1]s/build-image
invalidRegistry: invalid.registry.k8s.io/invalid
gcEtcdRegistry: %[1]s
gcRegistry: %[1]s
sigStorageRegistry: %[1]s/sig-storage
privateRegistry: %[1]s/k8s-authenticated-test
dockerLibraryRegistry: %[1]s/library
cloudProviderGcpRegistry: %[1]s/cloud-provider-gcp
`, host, promoterE2E)
}

// PauseRef is the pause image's reference on host, for the agents' --pause-image.
func PauseRef(host string) string { return host + "/pause:" + pauseVersion }

// The busybox image's users and groups, as upstream's busybox image has them.
const (
	passwd = `root:x:0:0:root:/root:/bin/sh
daemon:x:1:1:daemon:/usr/sbin:/bin/false
bin:x:2:2:bin:/bin:/bin/false
sys:x:3:3:sys:/dev:/bin/false
sync:x:4:100:sync:/bin:/bin/sync
mail:x:8:8:mail:/var/spool/mail:/bin/false
www-data:x:33:33:www-data:/var/www:/bin/false
operator:x:37:37:Operator:/var:/bin/false
nobody:x:65534:65534:nobody:/home:/bin/false
`
	group = `root:x:0:
daemon:x:1:
bin:x:2:
sys:x:3:
adm:x:4:
tty:x:5:
disk:x:6:
wheel:x:10:root
mail:x:8:
www-data:x:33:
users:x:100:
nogroup:x:65534:
`
)

// busyboxTree is the busybox image's tree: the static busybox of Debian's busybox-static with every applet it
// lists linked in /bin, users and groups, the usual directories.
func busyboxTree(ctx context.Context) (tree, error) {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return nil, fmt.Errorf("images: busybox is not installed (Debian package busybox-static)")
	}
	if libs, err := sharedLibraries(ctx, bb); err != nil {
		return nil, err
	} else if len(libs) > 0 {
		return nil, fmt.Errorf("images: %s is linked dynamically; the images need Debian's busybox-static", bb)
	}
	list, err := exec.CommandContext(ctx, bb, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("images: busybox --list: %w", err)
	}
	t := tree{}
	t.hostFile("/bin/busybox", 0o755, bb)
	for _, applet := range strings.Fields(string(list)) {
		if applet != "busybox" && !strings.Contains(applet, "/") {
			t.symlink("/bin/"+applet, "busybox")
		}
	}
	bash, err := exec.LookPath("bash")
	if err == nil {
		bash, err = filepath.EvalSymlinks(bash)
	}
	if err != nil {
		return nil, fmt.Errorf("images: bash is not installed (Debian package bash): %w", err)
	}
	if err := t.addProgram(ctx, "/usr/bin/bash", bash); err != nil {
		return nil, err
	}
	t.symlink("/bin/bash", "/usr/bin/bash")
	t.symlink("/bin/sh", "/usr/bin/bash")
	t.file("/etc/passwd", 0o644, []byte(passwd))
	t.file("/etc/group", 0o644, []byte(group))
	t.dir("/tmp", 0o1777)
	t.dir("/root", 0o700)
	for _, d := range []string{"/home", "/var/spool/mail", "/var/www", "/usr/bin", "/usr/sbin", "/etc", "/proc", "/sys", "/dev", "/run"} {
		t.dir(d, 0o755)
	}
	return t, nil
}

// nginxTree is the nginx layer: the program and its libraries, a configuration serving /usr/share/nginx/html on
// port 80 as the official image's default.conf does, logs to the container's stdout and stderr, the nginx user.
func nginxTree(ctx context.Context, nginx, version string) (tree, error) {
	t := tree{}
	if err := t.addProgram(ctx, "/usr/sbin/nginx", nginx); err != nil {
		return nil, err
	}
	t.file("/etc/nginx/nginx.conf", 0o644, []byte(nginxConf))
	t.file("/usr/share/nginx/html/index.html", 0o644, []byte(nginxIndex))
	t.file("/usr/share/nginx/html/50x.html", 0o644, []byte("<!DOCTYPE html>\n<html><body><h1>An error occurred.</h1></body></html>\n"))
	t.file("/usr/share/nginx/VERSION", 0o644, []byte(version+"\n"))
	t.symlink("/var/log/nginx/access.log", "/dev/stdout")
	t.symlink("/var/log/nginx/error.log", "/dev/stderr")
	t.dir("/var/lib/nginx", 0o755)
	t.dir("/var/cache/nginx", 0o755)
	t.file("/etc/passwd", 0o644, []byte(passwd+"nginx:x:101:101:nginx:/var/cache/nginx:/sbin/nologin\n"))
	t.file("/etc/group", 0o644, []byte(group+"nginx:x:101:nginx\n"))
	return t, nil
}

const nginxConf = `user nginx;
worker_processes auto;
error_log /var/log/nginx/error.log notice;
pid /run/nginx.pid;

events {
    worker_connections 1024;
}

http {
    types {
        text/html html htm;
        text/css css;
        text/plain txt;
        application/javascript js;
        application/json json;
        image/jpeg jpg jpeg;
        image/png png;
    }
    default_type application/octet-stream;
    access_log /var/log/nginx/access.log;
    sendfile on;
    keepalive_timeout 65;

    server {
        listen 80;
        server_name localhost;
        location / {
            root /usr/share/nginx/html;
            index index.html index.htm;
        }
        error_page 500 502 503 504 /50x.html;
        location = /50x.html {
            root /usr/share/nginx/html;
        }
    }
}
`

const nginxIndex = `<!DOCTYPE html>
<html>
<head><title>Welcome to nginx!</title></head>
<body>
<h1>Welcome to nginx!</h1>
<p>If you see this page, the nginx web server is successfully installed and working.</p>
</body>
</html>
`

// config is the part of an image's configuration the images set.
type config struct {
	entrypoint, cmd []string
	ports           []string
	user            string
	stopSignal      string
}

// image stacks layers into an amd64 Linux image with c's configuration.
func image(c config, layers ...v1.Layer) (v1.Image, error) {
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Env = []string{pathEnv}
	cf.Config.Entrypoint, cf.Config.Cmd = c.entrypoint, c.cmd
	cf.Config.User, cf.Config.StopSignal = c.user, c.stopSignal
	if len(c.ports) > 0 {
		cf.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range c.ports {
			cf.Config.ExposedPorts[p+"/tcp"] = struct{}{}
		}
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	return img, nil
}

// DebianNginx returns Debian's nginx program, extracted from the package's .deb into cacheDir (downloaded with
// `apt-get download` once; installing the package would start a server on this machine's port 80).
func DebianNginx(ctx context.Context, cacheDir string) (string, error) {
	bin := filepath.Join(cacheDir, "root/usr/sbin/nginx")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	debs := filepath.Join(cacheDir, "debs")
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return "", fmt.Errorf("images: %w", err)
	}
	download := func() ([]byte, error) {
		cmd := exec.CommandContext(ctx, "apt-get", "download", "-q", "nginx")
		cmd.Dir = debs
		return cmd.CombinedOutput()
	}
	if out, err := download(); err != nil {
		// The package lists may be missing on a fresh machine: read them, then try once more.
		if upd, err := exec.CommandContext(ctx, "apt-get", "update", "-q").CombinedOutput(); err != nil {
			return "", fmt.Errorf("images: apt-get download nginx: %s; apt-get update: %w\n%s", out, err, upd)
		}
		if out, err := download(); err != nil {
			return "", fmt.Errorf("images: apt-get download nginx: %w\n%s", err, out)
		}
	}
	found, err := filepath.Glob(filepath.Join(debs, "nginx_*.deb"))
	if err != nil || len(found) == 0 {
		return "", fmt.Errorf("images: apt-get download nginx left no nginx_*.deb in %s", debs)
	}
	sort.Strings(found)
	tmp, err := os.MkdirTemp(cacheDir, ".root-")
	if err != nil {
		return "", fmt.Errorf("images: %w", err)
	}
	defer os.RemoveAll(tmp)
	if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", found[len(found)-1], tmp).CombinedOutput(); err != nil {
		return "", fmt.Errorf("images: dpkg-deb -x: %w\n%s", err, out)
	}
	_ = os.RemoveAll(filepath.Join(cacheDir, "root"))
	if err := os.Rename(tmp, filepath.Join(cacheDir, "root")); err != nil {
		return "", fmt.Errorf("images: %w", err)
	}
	return bin, nil
}
