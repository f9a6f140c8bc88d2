module gpuplane.test/builds/toolkit-1.19.0

go 1.25.0

tool (
	github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-ctk
	github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-ctk-installer
)

require (
	cyphar.com/go-pathrs v0.2.1 // indirect
	github.com/NVIDIA/go-nvlib v0.9.1-0.20251202135446-d0f42ba016dd // indirect
	github.com/NVIDIA/go-nvml v0.13.0-1.0.20260212130905-92cf8c963449 // indirect
	github.com/NVIDIA/nvidia-container-toolkit v1.19.0 // indirect
	github.com/containerd/log v0.1.0 // indirect
	github.com/containerd/nri v0.11.0 // indirect
	github.com/containerd/ttrpc v1.2.7 // indirect
	github.com/cyphar/filepath-securejoin v0.6.1 // indirect
	github.com/fsnotify/fsnotify v1.7.0 // indirect
	github.com/golang/protobuf v1.5.3 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/knqyf263/go-plugin v0.9.0 // indirect
	github.com/moby/sys/capability v0.4.0 // indirect
	github.com/moby/sys/mountinfo v0.7.2 // indirect
	github.com/moby/sys/reexec v0.1.0 // indirect
	github.com/moby/sys/symlink v0.3.0 // indirect
	github.com/opencontainers/cgroups v0.0.6 // indirect
	github.com/opencontainers/runc v1.4.0 // indirect
	github.com/opencontainers/runtime-spec v1.3.0 // indirect
	github.com/opencontainers/runtime-tools v0.9.1-0.20251114084447-edf4cb3d2116 // indirect
	github.com/pelletier/go-toml v1.9.5 // indirect
	github.com/prometheus/procfs v0.19.2 // indirect
	github.com/sirupsen/logrus v1.9.4 // indirect
	github.com/tetratelabs/wazero v1.10.1 // indirect
	github.com/urfave/cli-altsrc/v3 v3.1.0 // indirect
	github.com/urfave/cli/v3 v3.6.2 // indirect
	golang.org/x/mod v0.33.0 // indirect
	golang.org/x/sys v0.41.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20230731190214-cbb8c96f2d6d // indirect
	google.golang.org/grpc v1.57.1 // indirect
	google.golang.org/protobuf v1.36.8 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
	sigs.k8s.io/yaml v1.4.0 // indirect
	tags.cncf.io/container-device-interface v1.1.0 // indirect
	tags.cncf.io/container-device-interface/specs-go v1.1.0 // indirect
)
