# container-gpu-kubelet-containerd: a layer writes a kubelet-style /etc/containerd/config.toml
# (runc only, SystemdCgroup, as a Kubernetes bootstrap does) after the DLAMI's toolkit had
# registered the nvidia runtime: GPU pods would get no GPU. The host looks healthy; the
# container-gpu check must fail naming the cause (no nvidia runtime in containerd's CRI
# configuration) and the fix.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir

    layer {
      name = "save-test-image"
      inline = [
        "printf 'dlami-sim image public.ecr.aws/amazonlinux/amazonlinux:2023-minimal\\n' > /tmp/al2023-minimal.tar",
        "docker load -i /tmp/al2023-minimal.tar",
        "ctr -n default images import /tmp/al2023-minimal.tar",
      ]
    }

    layer {
      name = "kubelet-containerd-config"
      file {
        source      = "files/config.toml"
        destination = "/etc/containerd/config.toml"
      }
    }

    container_check {
      image = "public.ecr.aws/amazonlinux/amazonlinux:2023-minimal"
    }
  }
}
