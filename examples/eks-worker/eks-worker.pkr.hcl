# An EKS GPU worker AMI on the AWS Deep Learning Base OSS DLAMI (Ubuntu 24.04), respecting
# "one owner per layer":
#
#   - the AMI owns the NVIDIA driver, Fabric Manager, EFA, GDRCopy and the NVIDIA Container
#     Toolkit (all from the DLAMI, all guarded by the dlami provisioner: a layer that installs a
#     second driver fails the bake on the `packages` check);
#   - the cluster owns the device plugin: deploy the NVIDIA k8s device plugin (or the GPU
#     Operator with driver.enabled=false and toolkit.enabled=false) and the EFA device plugin
#     as DaemonSets. Nothing here installs a driver or a device plugin;
#   - observability (DCGM exporter) may coexist and also runs in the cluster.
#
# Kubernetes node components: kubelet, the ECR credential provider and the IAM authenticator
# are the binaries EKS publishes for each Kubernetes version; containerd is the one the DLAMI
# ships, configured with the NVIDIA runtime. The node joins its cluster at boot from user-data
# (see files/README-bootstrap.txt).
#
#   packer init .
#   packer build -var kubernetes_version=1.34 -var kubernetes_patch=1.34.2 -var eks_build_date=YYYY-MM-DD .

packer {
  required_version = ">= 1.16.0"
  required_plugins {
    dlami = {
      source  = "github.com/dlami-bake/dlami"
      version = ">= 0.1.0"
    }
    amazon = {
      source  = "github.com/hashicorp/amazon"
      version = ">= 1.8.0"
    }
  }
}

variable "region" {
  type    = string
  default = "us-west-2"
}

variable "instance_type" {
  type    = string
  default = "p5.48xlarge"
}

variable "subnet_id" {
  type    = string
  default = null
}

variable "kubernetes_version" {
  type        = string
  description = "EKS Kubernetes minor version of the node components, e.g. 1.34."
  default     = "1.34"
}

# No defaults: pick the release EKS publishes for your cluster version, e.g.
#   aws s3 ls --region us-west-2 s3://amazon-eks/ | grep 1.34
#   aws s3 ls --region us-west-2 s3://amazon-eks/1.34.2/
variable "kubernetes_patch" {
  type        = string
  description = "Full Kubernetes version of the EKS node binaries, e.g. 1.34.2."
}

variable "eks_build_date" {
  type        = string
  description = "Date folder of the EKS node binaries (YYYY-MM-DD) under s3://amazon-eks/<kubernetes_patch>/."
}

variable "report_dir" {
  type    = string
  default = "dlami-reports/eks-worker"
}

data "dlami" "base" {
  region = var.region
}

locals {
  # No data source output in the name: `packer validate` sees those as "<unknown>".
  ami_name = "eks-gpu-${var.kubernetes_version}-${formatdate("YYYYMMDDhhmm", timestamp())}"
}

source "amazon-ebs" "eks" {
  region        = var.region
  source_ami    = data.dlami.base.ami_id
  instance_type = var.instance_type
  subnet_id     = var.subnet_id
  ssh_username  = "ubuntu"
  ssh_timeout   = "30m"
  ami_name      = local.ami_name

  launch_block_device_mappings {
    device_name           = data.dlami.base.root_device_name
    volume_size           = 200
    volume_type           = "gp3"
    delete_on_termination = true
  }

  tags = {
    Name                 = local.ami_name
    "dlami:family"       = "eks-gpu-${var.kubernetes_version}"
    "dlami:source_ami"   = data.dlami.base.ami_id
    "dlami:build"        = data.dlami.base.build
    "eks:kubernetes"     = var.kubernetes_patch
    "dlami:driver_owner" = "ami"
  }
}

build {
  name    = "eks-worker"
  sources = ["source.amazon-ebs.eks"]

  provisioner "dlami" {
    report_dir = var.report_dir

    layer {
      name = "eks-node-components"
      # The DLAMI's containerd and NVIDIA Container Toolkit, nothing new from a GPU vendor.
      scripts = ["${path.root}/scripts/eks-node.sh"]
      environment = {
        KUBERNETES_VERSION = var.kubernetes_version
        KUBERNETES_PATCH   = var.kubernetes_patch
        EKS_BUILD_DATE     = var.eks_build_date
      }
      file {
        source      = "${path.root}/files/kubelet.service"
        destination = "/etc/systemd/system/kubelet.service"
      }
      file {
        source      = "${path.root}/files/README-bootstrap.txt"
        destination = "/etc/eks/README-bootstrap.txt"
      }
    }

    expect {
      nvidia_driver = ">= 595"
      efa_installer = ">= 1.50.0"
    }

    # Every boot checks itself before kubelet starts: a node that fails (a GPU missing, the
    # driver or a guarded package moved, memlock limited for containerd) never joins the
    # cluster (action "block"), and node-problem-detector keeps judging it afterwards
    # (condition DLAMINodeCheckFailed, see files/node-problem-detector.yaml for the taint and
    # EKS node auto-repair / Karpenter wiring).
    node_check {
      action = "block"
      before = ["kubelet.service"]
    }
  }
}
