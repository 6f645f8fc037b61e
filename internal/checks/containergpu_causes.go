package checks

import "strings"

// containerCause is a known failure message of GPU containers, what it means and its fix
// (../shared/docs/container-gpu.md section 2.2, each with its public source).
type containerCause struct {
	// all are the lower-case substrings the message holds, all of them.
	all   []string
	cause string
	fix   string
}

// containerCauses are matched in order; the first match names the cause.
var containerCauses = []containerCause{
	{[]string{`could not select device driver "" with capabilities: [[gpu]]`},
		"the NVIDIA container toolkit is not registered with docker (not installed, or a snap docker) (NVIDIA/nvidia-docker#1352, #1642)",
		"install nvidia-container-toolkit, run `nvidia-ctk runtime configure --runtime=docker` and restart docker"},
	{[]string{`could not select device driver "nvidia" with capabilities`},
		"docker names the nvidia runtime but it is not configured (infiniflow/ragflow#9573)",
		"run `nvidia-ctk runtime configure --runtime=docker` and restart docker"},
	{[]string{"nvidia-container-cli: initialization error", "driver not loaded"},
		"the NVIDIA driver is not loaded: NVML cannot initialize (NVIDIA/nvidia-container-toolkit#260, #1269)",
		"load the driver for the running kernel (see the gpu and nvidia-driver checks); a layer that changed the kernel or the module must leave them matching"},
	{[]string{"nvidia-container-cli: initialization error", "driver error: failed to process request"},
		"libnvidia-container cannot talk to the driver: toolkit and driver do not match, or the toolkit's driver root is wrong (NVIDIA/nvidia-container-toolkit#183)",
		"reinstall the toolkit after the driver and check nvidia-container-runtime's config.toml root"},
	{[]string{"mount error: file creation failed", "file exists"},
		"a libnvidia-container regression: it cannot mount the driver's files over ones already in the container (awslabs/amazon-eks-ami#2165)",
		"pin libnvidia-container1/-tools and the toolkit to a release without the regression in a layer"},
	{[]string{"error parsing imex info", "unsupported imex channel value"},
		"toolkit and libnvidia-container from different releases (IMEX channel parsing) (awslabs/amazon-eks-ami#2062)",
		"install nvidia-container-toolkit, nvidia-container-toolkit-base, libnvidia-container1 and libnvidia-container-tools at one version"},
	{[]string{"nvidia-application-profiles-rc.d", "read-only file system"},
		"toolkit 1.20.0's update-application-profile CDI hook fails when /etc/nvidia is mounted read-only (awslabs/amazon-eks-ami#2790)",
		"move the toolkit off 1.20.0 (1.20.1 or later), or do not mount /etc/nvidia read-only"},
	{[]string{"failed to add device rules", "bpf_prog_query"},
		"libnvidia-container cannot set the cgroup v2 device rules (BPF_CGROUP_DEVICE) (NVIDIA/nvidia-container-toolkit#139)",
		"use a toolkit with cgroup v2 support and the systemd cgroup driver, or let the runtime manage devices through CDI"},
	{[]string{"unresolvable cdi devices"},
		"the CDI spec does not define nvidia.com/gpu=all (no spec in /etc/cdi or /var/run/cdi, or a stale one)",
		"enable nvidia-cdi-refresh.path (toolkit 1.18+) or run `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` in a layer"},
	{[]string{"toolkit is not ready"},
		"the GPU Operator's toolkit validation failed (NVIDIA/gpu-operator#579, #297)",
		"on the DLAMI run the operator with toolkit.enabled=false and driver.enabled=false: the image owns both"},
}

// explainContainer names the cause and the fix of the first known message in text, or "".
func explainContainer(text string) string {
	low := strings.ToLower(text)
	for _, c := range containerCauses {
		match := true
		for _, s := range c.all {
			if !strings.Contains(low, strings.ToLower(s)) {
				match = false
				break
			}
		}
		if match {
			return "cause: " + c.cause + "; fix: " + c.fix
		}
	}
	return ""
}

// withCause appends the known cause of text to msg.
func withCause(msg, text string) string {
	if c := explainContainer(text); c != "" {
		return msg + " (" + c + ")"
	}
	return msg
}
