package agentapi

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// linkRewriter rewrites what a pod answers through pods/proxy or services/proxy so that its own absolute links
// lead back through the proxy, as upstream's proxy transport does: a URL with an absolute path, on no host or on
// the pod's own or the one the client asked for, is put below the proxy's prefix (relative URLs already work,
// other hosts are left alone). It rewrites the Location of redirects and the URL attributes of HTML pages,
// streaming: a page is never held in memory whole.
type linkRewriter struct {
	prefix      string   // the proxy's root, ".../pods/<name>/proxy"
	requestHost string   // the Host the client asked
	podHosts    []string // the pod's host as its links may name it: "ip:port", and "ip" on the scheme's port
}

func newLinkRewriter(prefix, requestHost, scheme string, addr netip.Addr, port int32) *linkRewriter {
	hostPort := net.JoinHostPort(addr.String(), strconv.Itoa(int(port)))
	l := &linkRewriter{prefix: prefix, requestHost: requestHost, podHosts: []string{hostPort}}
	if (scheme == "http" && port == 80) || (scheme == "https" && port == 443) {
		host := addr.String()
		if addr.Is6() {
			host = "[" + host + "]"
		}
		l.podHosts = append(l.podHosts, host)
	}
	return l
}

// rewrite returns u as it reads through the proxy.
func (l *linkRewriter) rewrite(u *url.URL) string {
	if u.Host != "" && u.Host != l.requestHost && !slices.Contains(l.podHosts, u.Host) {
		return u.String()
	}
	if !strings.HasPrefix(u.Path, "/") {
		return u.String()
	}
	if u.Host != l.requestHost {
		u.Scheme, u.Host = "", ""
	}
	if strings.HasPrefix(u.Path, l.prefix) {
		return u.String()
	}
	p := path.Join(l.prefix, path.Clean(u.Path)) // cleaned first: a link cannot climb out of the prefix
	if strings.HasSuffix(u.Path, "/") {
		p += "/"
	}
	u.Path, u.RawPath = p, ""
	return u.String()
}

// response rewrites a pod's answer: its Location, or the links of an HTML body (plain or gzip; other encodings
// pass unchanged, as upstream's).
func (l *linkRewriter) response(resp *http.Response) {
	if loc := resp.Header.Get("Location"); loc != "" {
		if u, err := url.Parse(loc); err == nil {
			resp.Header.Set("Location", l.rewrite(u))
		}
		return
	}
	mediaType, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	if !strings.EqualFold(strings.TrimSpace(mediaType), "text/html") || resp.Request.Method == http.MethodHead ||
		resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified {
		return
	}
	enc := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding")))
	if enc != "" && enc != "gzip" {
		return
	}
	pr, pw := io.Pipe()
	body := resp.Body
	go func() {
		defer body.Close()
		_ = pw.CloseWithError(l.copyHTML(pw, body, enc == "gzip"))
	}()
	resp.Body = &rewrittenBody{PipeReader: pr, src: body}
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
}

// rewrittenBody is a rewritten page as it is produced; closing it stops the rewriting and the pod's body.
type rewrittenBody struct {
	*io.PipeReader
	src io.Closer
}

func (b *rewrittenBody) Close() error {
	_ = b.src.Close() // unblocks a rewriter waiting for the pod
	return b.PipeReader.Close()
}

// copyHTML copies an HTML page from src to dst with its links rewritten, decompressing and compressing again
// when it is gzip.
func (l *linkRewriter) copyHTML(dst io.Writer, src io.Reader, gz bool) error {
	if !gz {
		return rewriteHTML(dst, src, l.rewrite)
	}
	zr, err := gzip.NewReader(src)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(dst)
	if err := rewriteHTML(zw, zr, l.rewrite); err != nil {
		return err
	}
	return zw.Close()
}

// maxHTMLToken bounds one token of a page being rewritten (a tag with its attributes, a run of text): past it
// the rest of the page passes unchanged rather than being held in memory.
const maxHTMLToken = 1 << 20

// rewriteHTML copies the HTML from src to dst, rewriting the URL attributes of the tags that have them; every
// other byte passes as it came (a tag whose URLs change is written again from its parsed form).
func rewriteHTML(dst io.Writer, src io.Reader, rewrite func(*url.URL) string) error {
	z := html.NewTokenizer(src)
	z.SetMaxBuf(maxHTMLToken)
	var raw []byte
	for {
		tt := z.Next()
		raw = append(raw[:0], z.Raw()...) // TagName and Token change the tokenizer's buffer
		switch tt {
		case html.ErrorToken:
			if _, err := dst.Write(raw); err != nil {
				return err
			}
			err := z.Err()
			switch {
			case errors.Is(err, io.EOF):
				return nil
			case errors.Is(err, html.ErrBufferExceeded):
				if _, err := dst.Write(z.Buffered()); err != nil {
					return err
				}
				_, err := io.Copy(dst, src)
				return err
			}
			return err
		case html.StartTagToken, html.SelfClosingTagToken:
			if out, ok := rewriteTag(z, tagAtom(raw), rewrite); ok {
				raw = append(raw[:0], out...)
			}
		}
		if _, err := dst.Write(raw); err != nil {
			return err
		}
	}
}

// rewriteTag returns the current tag written again with its URL attributes rewritten; false when it has none or
// none changed.
func rewriteTag(z *html.Tokenizer, tag atom.Atom, rewrite func(*url.URL) string) (string, bool) {
	attrs := urlAttrs[tag]
	if len(attrs) == 0 {
		return "", false
	}
	tok := z.Token()
	changed := false
	for i, a := range tok.Attr {
		if a.Namespace != "" || !slices.Contains(attrs, a.Key) {
			continue
		}
		u, err := url.Parse(strings.TrimSpace(a.Val))
		if err != nil {
			continue // not a URL: left as it is
		}
		if v := rewrite(u); v != strings.TrimSpace(a.Val) {
			tok.Attr[i].Val, changed = v, true
		}
	}
	return tok.String(), changed
}

// tagAtom is the element of a start tag as it came ("<A href=..." is atom.A), without parsing its attributes.
func tagAtom(raw []byte) atom.Atom {
	name := bytes.TrimPrefix(raw, []byte("<"))
	if end := bytes.IndexAny(name, " \t\n\f\r/>"); end >= 0 {
		name = name[:end]
	}
	return atom.Lookup(bytes.ToLower(name))
}

// urlAttrs are the attributes that hold one URL, by element (HTML 4.01's and the HTML standard's).
var urlAttrs = map[atom.Atom][]string{
	atom.A: {"href"}, atom.Applet: {"codebase"}, atom.Area: {"href"}, atom.Audio: {"src"}, atom.Base: {"href"},
	atom.Blockquote: {"cite"}, atom.Body: {"background"}, atom.Button: {"formaction"}, atom.Command: {"icon"},
	atom.Del: {"cite"}, atom.Embed: {"src"}, atom.Form: {"action"}, atom.Frame: {"longdesc", "src"},
	atom.Head: {"profile"}, atom.Html: {"manifest"}, atom.Iframe: {"longdesc", "src"},
	atom.Img: {"longdesc", "src", "usemap"}, atom.Input: {"formaction", "src", "usemap"}, atom.Ins: {"cite"},
	atom.Link: {"href"}, atom.Object: {"classid", "codebase", "data", "usemap"}, atom.Q: {"cite"},
	atom.Script: {"src"}, atom.Source: {"src"}, atom.Track: {"src"}, atom.Video: {"poster", "src"},
}
