// Package registries is the node's registry configuration: mirrors, TLS settings and credentials of container
// registries, written in k3s's registries.yaml format (the one users of k3s and RKE2 know), and rendered for
// containerd 1.6's CRI plugin as a hosts directory (its registry config_path) plus node-level credentials in the
// manner of kubelet's node keyring.
//
// # The file
//
//	mirrors:
//	  docker.io:
//	    endpoint: ["https://mirror.example.com:5000"]
//	  "*":                        # registries that have no entry of their own
//	    endpoint: ["https://cache.example.com"]
//	configs:
//	  "mirror.example.com:5000":
//	    auth: {username: u, password: p}   # or auth: base64("u:p"), or identity_token: t
//	    tls: {ca_file: /etc/ssl/mirror-ca.pem, cert_file: /etc/ssl/node.pem, key_file: /etc/ssl/node-key.pem}
//
// Load and Parse read it strictly and validate it (Validate): registry keys are host[:port] ("*" only under
// mirrors; configs has no wildcard here), endpoints are http or https URLs with a host and an optional path (not
// an IPv6 address: containerd 1.6's TOML parser cannot read one in a table name), TLS files are absolute,
// readable and what they claim to be, credentials take exactly one form. Errors name the
// field (*FieldError, matching ErrInvalid). k3s's rewrite is refused: containerd 1.6 cannot rewrite image
// names. At most MaxFileSize bytes, MaxRegistries registries and MaxEndpoints endpoints per mirror.
//
// # Hosts directory (WriteHostsDir)
//
// containerd 1.6's CRI plugin, with config_path set, resolves an image of registry R by reading, in the first
// directory of config_path that has one, R's host directory: "host_port_" (R's ":port" rewritten), then
// "host:port", then "_default" (remotes/docker/config hostPaths). Its hosts.toml lists [host."<url>"] tables,
// tried in file order, then the server; without a file, the server alone: R's default endpoint, https://R,
// https://registry-1.docker.io for docker.io, and http://R for a loopback R (localhost, 127.0.0.0/8, ::1).
// WriteHostsDir writes, as k3s does:
//
//   - for a registry with mirror endpoints: <host_port_>/hosts.toml with server = its default endpoint (https
//     for a loopback registry that has TLS settings in configs) and the server's TLS settings, then one [host]
//     table per endpoint in order, with capabilities pull and resolve, the endpoint host's TLS settings from
//     configs (ca, client = [[cert, key]], skip_verify; none for http:// endpoints), and override_path when the
//     endpoint has a path other than "" or /v2 (the path is then the registry API's root, as k3s reads it). A
//     last endpoint equal to the default endpoint is left out: containerd tries the server last anyway.
//   - for a registry with a configs entry (credentials or TLS settings) and no mirrors: its server and TLS
//     settings, which also keeps the wildcard's mirrors away from it (a configs entry is a registry's own entry,
//     as in k3s). Entries that set nothing get no file.
//   - for "*": _default/hosts.toml with the mirror tables and no server, so that containerd tries each registry's
//     own default endpoint last. Only registries without a host directory of their own use it.
//
// containerd 1.6 (up to 1.7.31) rejects a hosts.toml without any host table ("invalid `host` tree") and then
// ignores the file, so a file without mirrors ends with an empty [host] table, which names none. The directory is
// replaced atomically; see WriteHostsDir. If config_path lists several directories, containerd uses the first that
// has a matching host directory, _default included: with the agent's directory first, its registries take
// precedence, and with a wildcard no later directory is read at all.
//
// # Credentials
//
// Credentials are not written into hosts.toml: containerd 1.6's hosts.toml has no credential fields, and the
// deprecated registry.configs.auth of containerd's own config.toml would need a containerd restart for every
// change and apply only to pulls without credentials of their own. Instead Credentials gives, for an image's
// registry, the CRI AuthConfigs the kubelet appends to a pod's pull-secret credentials, as kubelet's node-level
// keyring: each mirror endpoint host's, then the registry's own. A CRI pull carries one AuthConfig, which
// containerd gives only to the host its ServerAddress names, so the kubelet tries them one pull at a time; each
// pull still walks the mirrors in order, anonymously where the AuthConfig is not theirs.
package registries
