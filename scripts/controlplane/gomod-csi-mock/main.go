// csi-mock: k8s.io/kubernetes' CSI mock driver on a unix socket, registered
// with a node agent the way node-driver-registrar does it: it serves
// pluginregistration v1 Registration on a socket in <root-dir>/plugins_registry
// and exits when the agent reports the registration failed. Every CSI call is
// logged on stdout as one JSON line {"method","request","error"} so that tests
// can check what the agent asked.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/protoadapt"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/mock/service"
)

type registration struct {
	registerapi.UnimplementedRegistrationServer
	name, endpoint string
	failed         chan string
}

func (r *registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: r.name, Endpoint: r.endpoint, SupportedVersions: []string{"1.0.0"}}, nil
}

func (r *registration) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	line, _ := json.Marshal(map[string]any{"registration": s.PluginRegistered, "error": s.Error})
	emit(line)
	if !s.PluginRegistered {
		r.failed <- s.Error
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

var out sync.Mutex

func emit(line []byte) {
	out.Lock()
	defer out.Unlock()
	os.Stdout.Write(append(line, '\n'))
}

func listen(path string) net.Listener {
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "csi-mock: listen %s: %v\n", path, err)
		os.Exit(1)
	}
	return l
}

func main() {
	name := flag.String("name", "io.kubernetes.storage.mock", "driver name")
	endpoint := flag.String("csi-address", "", "the driver's socket path")
	registrationPath := flag.String("registration-path", "", "the registration socket path (in the agent's plugins_registry)")
	attachLimit := flag.Int64("attach-limit", 0, "max_volumes_per_node in NodeGetInfo")
	topology := flag.Bool("topology", true, "report the mock's topology segment")
	nodeExpansion := flag.Bool("node-expansion", false, "advertise EXPAND_VOLUME (NodeExpandVolume records the new size)")
	flag.Parse()
	if *endpoint == "" || *registrationPath == "" {
		fmt.Fprintln(os.Stderr, "csi-mock: --csi-address and --registration-path are required")
		os.Exit(2)
	}

	mock := service.New(service.Config{DriverName: *name, DisableAttach: true, AttachLimit: *attachLimit, EnableTopology: *topology, PermissiveTargetPath: true, NodeExpansionRequired: *nodeExpansion})
	logCalls := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		res, err := handler(ctx, req)
		entry := map[string]any{"method": info.FullMethod}
		// The CSI spec's Go types are protobuf APIv1 messages.
		if m, ok := req.(protoadapt.MessageV1); ok {
			raw, _ := protojson.Marshal(protoadapt.MessageV2Of(m))
			entry["request"] = json.RawMessage(raw)
		}
		if err != nil {
			entry["error"] = err.Error()
		}
		line, _ := json.Marshal(entry)
		emit(line)
		return res, err
	}
	csiServer := grpc.NewServer(grpc.UnaryInterceptor(logCalls))
	csi.RegisterIdentityServer(csiServer, mock)
	csi.RegisterControllerServer(csiServer, mock)
	csi.RegisterNodeServer(csiServer, mock)
	go func() { _ = csiServer.Serve(listen(*endpoint)) }()

	reg := &registration{name: *name, endpoint: *endpoint, failed: make(chan string, 1)}
	regServer := grpc.NewServer()
	registerapi.RegisterRegistrationServer(regServer, reg)
	go func() { _ = regServer.Serve(listen(*registrationPath)) }()

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	code := 0
	select {
	case <-signals:
	case msg := <-reg.failed:
		// As node-driver-registrar: a refused registration ends the process (its pod restarts it).
		fmt.Fprintf(os.Stderr, "csi-mock: registration failed: %s\n", msg)
		code = 1
	}
	regServer.Stop()
	csiServer.Stop()
	_ = os.Remove(*registrationPath)
	_ = os.Remove(*endpoint)
	os.Exit(code)
}
