module gpuplane.test/builds/toolkit-1.20.0

go 1.25.0

tool (
	github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook
	github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-container-runtime
	github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-ctk
	github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-ctk-installer
)

require (
	cyphar.com/go-pathrs v0.2.5 // indirect
	github.com/Masterminds/semver/v3 v3.5.0 // indirect
	github.com/NVIDIA/go-nvlib v0.12.0 // indirect
	github.com/NVIDIA/go-nvml v0.13.3-1 // indirect
	github.com/NVIDIA/nvidia-container-toolkit v1.20.0 // indirect
	github.com/containerd/log v0.1.0 // indirect
	github.com/containerd/nri v0.12.1 // indirect
	github.com/containerd/ttrpc v1.2.7 // indirect
	github.com/cyphar/filepath-securejoin v0.7.0 // indirect
	github.com/fsnotify/fsnotify v1.7.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/knqyf263/go-plugin v0.9.0 // indirect
	github.com/moby/sys/capability v0.4.0 // indirect
	github.com/moby/sys/mountinfo v0.7.2 // indirect
	github.com/moby/sys/reexec v0.1.0 // indirect
	github.com/moby/sys/symlink v0.3.0 // indirect
	github.com/opencontainers/cgroups v0.0.7 // indirect
	github.com/opencontainers/runc v1.4.3 // indirect
	github.com/opencontainers/runtime-spec v1.3.0 // indirect
	github.com/opencontainers/runtime-tools v0.9.1-0.20251114084447-edf4cb3d2116 // indirect
	github.com/pelletier/go-toml v1.9.5 // indirect
	github.com/prometheus/procfs v0.21.1 // indirect
	github.com/sirupsen/logrus v1.9.4 // indirect
	github.com/tetratelabs/wazero v1.11.0 // indirect
	github.com/urfave/cli-altsrc/v3 v3.1.0 // indirect
	github.com/urfave/cli/v3 v3.10.1 // indirect
	golang.org/x/mod v0.38.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260414002931-afd174a4e478 // indirect
	google.golang.org/grpc v1.82.1 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
	sigs.k8s.io/yaml v1.4.0 // indirect
	tags.cncf.io/container-device-interface v1.1.0 // indirect
	tags.cncf.io/container-device-interface/specs-go v1.1.0 // indirect
)
