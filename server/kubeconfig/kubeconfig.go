// Package kubeconfig builds the kubeconfig of one Wheelhouse cluster, for `wheelhouse kubeconfig` and the
// platform API's download.
package kubeconfig

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdlatest "k8s.io/client-go/tools/clientcmd/api/latest"
)

// Build is a kubeconfig with one cluster, user and context, all named wheelhouse-<cluster>, for the cluster's
// API at server (https://host/clusters/<cluster>), authenticating with token. ca is the PEM of the CA that signed
// the server's certificate (nil: the system's roots). Encoded as clientcmd.Write does.
func Build(cluster, server, token string, ca []byte) ([]byte, error) {
	name := "wheelhouse-" + cluster
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	b, err := runtime.Encode(clientcmdlatest.Codec, cfg)
	if err != nil {
		return nil, fmt.Errorf("encode kubeconfig: %w", err)
	}
	return b, nil
}
