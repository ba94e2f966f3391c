// Builds csi-mock (../build.sh --with-csi-mock) for the CSI integration test:
// k8s.io/kubernetes' CSI mock driver (test/e2e/storage/drivers/csi-test/mock,
// the driver upstream's own e2e storage tests run) served on a unix socket,
// with the registration side of node-driver-registrar (k8s.io/kubelet's
// pluginregistration v1) on a socket in the agent's plugins_registry.
// node-driver-registrar and csi-driver-host-path themselves are not on the
// module proxy reachable here. A module of its own, so building it never
// rebuilds the control plane; versions in step with ../gomod.
module bunlet.local/csi-mock

go 1.25.0

godebug default=go1.24

require (
	github.com/container-storage-interface/spec v1.9.0
	google.golang.org/grpc v1.72.1
	google.golang.org/protobuf v1.36.12-0.20260120151049-f2248ac996af
	k8s.io/kubelet v0.34.12
	k8s.io/kubernetes v1.34.12
)

require (
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	golang.org/x/net v0.56.0 // indirect
	golang.org/x/sys v0.46.0 // indirect
	golang.org/x/text v0.39.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20250303144028-a0af3efb3deb // indirect
	k8s.io/klog/v2 v2.130.1 // indirect
)

replace (
	k8s.io/api => k8s.io/api v0.34.12
	k8s.io/apiextensions-apiserver => k8s.io/apiextensions-apiserver v0.34.12
	k8s.io/apimachinery => k8s.io/apimachinery v0.34.12
	k8s.io/apiserver => k8s.io/apiserver v0.34.12
	k8s.io/cli-runtime => k8s.io/cli-runtime v0.34.12
	k8s.io/client-go => k8s.io/client-go v0.34.12
	k8s.io/cloud-provider => k8s.io/cloud-provider v0.34.12
	k8s.io/cluster-bootstrap => k8s.io/cluster-bootstrap v0.34.12
	k8s.io/code-generator => k8s.io/code-generator v0.34.12
	k8s.io/component-base => k8s.io/component-base v0.34.12
	k8s.io/component-helpers => k8s.io/component-helpers v0.34.12
	k8s.io/controller-manager => k8s.io/controller-manager v0.34.12
	k8s.io/cri-api => k8s.io/cri-api v0.34.12
	k8s.io/cri-client => k8s.io/cri-client v0.34.12
	k8s.io/csi-translation-lib => k8s.io/csi-translation-lib v0.34.12
	k8s.io/dynamic-resource-allocation => k8s.io/dynamic-resource-allocation v0.34.12
	k8s.io/endpointslice => k8s.io/endpointslice v0.34.12
	k8s.io/externaljwt => k8s.io/externaljwt v0.34.12
	k8s.io/kms => k8s.io/kms v0.34.12
	k8s.io/kube-aggregator => k8s.io/kube-aggregator v0.34.12
	k8s.io/kube-controller-manager => k8s.io/kube-controller-manager v0.34.12
	k8s.io/kube-proxy => k8s.io/kube-proxy v0.34.12
	k8s.io/kube-scheduler => k8s.io/kube-scheduler v0.34.12
	k8s.io/kubectl => k8s.io/kubectl v0.34.12
	k8s.io/kubelet => k8s.io/kubelet v0.34.12
	k8s.io/metrics => k8s.io/metrics v0.34.12
	k8s.io/mount-utils => k8s.io/mount-utils v0.34.12
	k8s.io/pod-security-admission => k8s.io/pod-security-admission v0.34.12
)
