// Command podserver is the container program of the agent e2e test (agent_e2e_test.go): the process runtime
// runs host binaries, so the test builds this one and names it in its pods' commands. It has no dependencies
// on the host's tools.
//
//	podserver serve [-listen :8080] [-unready] [-healthy-for 2s]  HTTP: / greets, /healthz, /ready, /ready/on
//	podserver get [-n N] URL                                     prints the body (N times, a new connection each); fails unless 2xx
//	podserver lookup NAME                                        prints NAME's addresses, sorted (the pod's resolv.conf)
//	podserver srv SERVICE PROTO NAME                             prints the SRV records of _SERVICE._PROTO.NAME as "target port"
//	podserver env NAME...                                        prints NAME=value of each variable set
//	podserver tick                                               prints "tick N" every 200 ms
//	podserver hog                                                allocates memory until killed
//	podserver crash                                              prints a line and exits 3
//	podserver cat                                                copies stdin to stdout
//	podserver echo WORDS...                                      prints the words
//	podserver read FILE...                                       prints the files (an error's text for one it cannot read)
//	podserver write FILE...                                      creates the files, printing each one's outcome
//	podserver api PATH                                           GETs PATH of the cluster's API as client-go's in-cluster
//	                                                             configuration does; prints the body, fails unless 2xx
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: podserver serve|get|lookup|srv|env|tick|hog|crash|cat|echo|read|write|api ...")
		os.Exit(2)
	}
	args := os.Args[2:]
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(args)
	case "get":
		err = get(args)
	case "lookup":
		err = lookup(args)
	case "srv":
		err = srv(args)
	case "env":
		for _, name := range args {
			if v, ok := os.LookupEnv(name); ok {
				fmt.Printf("%s=%s\n", name, v)
			}
		}
	case "tick":
		for i := 0; ; i++ {
			fmt.Printf("tick %d\n", i)
			time.Sleep(200 * time.Millisecond)
		}
	case "hog":
		hog()
	case "crash":
		fmt.Println("crashing on purpose")
		os.Exit(3)
	case "cat":
		_, err = io.Copy(os.Stdout, os.Stdin)
	case "echo":
		fmt.Println(strings.Join(args, " "))
	case "read": // print files (a security context's effects: /proc/self/status, sysctls)
		for _, f := range args {
			b, rerr := os.ReadFile(f)
			if rerr != nil {
				fmt.Println(rerr)
				continue
			}
			fmt.Print(string(b))
		}
	case "write": // create files, printing why one could not be (a read-only root filesystem)
		for _, f := range args {
			if werr := os.WriteFile(f, []byte("written\n"), 0o644); werr != nil {
				fmt.Println(werr)
			} else {
				fmt.Println("wrote", f)
			}
		}
	case "api":
		err = api(args)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "podserver:", err)
		os.Exit(1)
	}
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	listen := fs.String("listen", ":8080", "address to listen on")
	unready := fs.Bool("unready", false, "answer /ready with 503 until /ready/on is called")
	healthyFor := fs.Duration("healthy-for", 0, "answer /healthz with 500 after this long (0: always healthy)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var ready atomic.Bool
	ready.Store(!*unready)
	start := time.Now()
	name := os.Getenv("POD_NAME")
	if name == "" {
		name, _ = os.Hostname() // a pod's host name is its name
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s\n", name)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if *healthyFor > 0 && time.Since(start) > *healthyFor {
			http.Error(w, "sick", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/ready", func(w http.ResponseWriter, r *http.Request) {
		if !ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("/ready/on", func(w http.ResponseWriter, r *http.Request) {
		ready.Store(true)
		fmt.Fprintln(w, "ready now")
	})
	fmt.Printf("serving on %s as %s\n", *listen, name)
	return http.ListenAndServe(*listen, mux)
}

func get(args []string) error {
	fs := flag.NewFlagSet("get", flag.ExitOnError)
	n := fs.Int("n", 1, "requests, each on a new connection")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("usage: podserver get [-n N] URL")
	}
	url := fs.Arg(0)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for range *n {
		res, err := client.Get(url)
		if err != nil {
			return err
		}
		_, err = io.Copy(os.Stdout, res.Body)
		res.Body.Close()
		if err != nil {
			return err
		}
		if res.StatusCode/100 != 2 {
			return fmt.Errorf("GET %s: %s", url, res.Status)
		}
	}
	return nil
}

// serviceAccountDir is where every pod finds its ServiceAccount token and the API's CA.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// api does what rest.InClusterConfig sets up: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT, the
// server verified against ca.crt, the token as bearer.
func api(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: podserver api PATH")
	}
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return fmt.Errorf("not in a cluster: KUBERNETES_SERVICE_HOST/PORT unset")
	}
	token, err := os.ReadFile(serviceAccountDir + "/token")
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(serviceAccountDir + "/ca.crt")
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return fmt.Errorf("%s/ca.crt holds no certificate", serviceAccountDir)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, err := http.NewRequest("GET", "https://"+net.JoinHostPort(host, port)+args[0], nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if _, err := io.Copy(os.Stdout, res.Body); err != nil {
		return err
	}
	fmt.Println()
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("GET %s: %s", args[0], res.Status)
	}
	return nil
}

// resolver is Go's own resolver, reading the pod's /etc/resolv.conf (search list, ndots) as glibc would.
var resolver = &net.Resolver{PreferGo: true}

func lookup(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: podserver lookup NAME")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs, err := resolver.LookupHost(ctx, args[0])
	if err != nil {
		return err
	}
	sort.Strings(addrs)
	fmt.Println(strings.Join(addrs, "\n"))
	return nil
}

func srv(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("usage: podserver srv SERVICE PROTO NAME")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, recs, err := resolver.LookupSRV(ctx, args[0], args[1], args[2])
	if err != nil {
		return err
	}
	for _, r := range recs {
		fmt.Printf("%s %d\n", r.Target, r.Port)
	}
	return nil
}

// hog allocates and touches memory, 1 MiB at a time, keeping all of it, until the kernel kills it.
func hog() {
	var kept [][]byte
	for i := 1; ; i++ {
		b := make([]byte, 1<<20)
		for j := range b {
			b[j] = byte(j)
		}
		kept = append(kept, b)
		if i%8 == 0 {
			fmt.Printf("holding %d MiB\n", i)
		}
	}
}
