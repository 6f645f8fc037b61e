# First-boot scenarios of the dlami post-processor (ebs_test.go). The bake itself is healthy;
# what the image does at its first boot on a new instance is not:
#   - mode "dist-upgrade": a layer drops a cloud-init per-instance script (first-boot/) that runs
#     `apt-get -y dist-upgrade`, which moves the unheld NVIDIA userspace on first boot;
#     on_failure = "deregister" must remove the AMI and its snapshots in every region.
#   - mode "grub-1015": a shell provisioner after the dlami provisioner installs kernel 1015,
#     holds it and makes it the GRUB default: the dlami provisioner never sees it, the first
#     boot runs 1015; on_failure = "tag" marks the AMI dlami:verified = false, and the manifest
#     sequence keeps it registered.
#   - mode "slow": a per-instance script that takes minutes, so that the harness can press
#     Ctrl-C while the post-processor waits for the first boot to settle.
# Differs from a user's template only in the lines marked "fake endpoint".

variable "aws_endpoint" {
  type = string
}

variable "report_dir" {
  type = string
}

variable "mode" {
  type = string
  validation {
    condition     = contains(["dist-upgrade", "grub-1015", "slow"], var.mode)
    error_message = "The mode must be dist-upgrade, grub-1015 or slow."
  }
}

variable "region" {
  type    = string
  default = "us-east-1"
}

data "dlami" "base" {
  region              = var.region
  custom_endpoint_ec2 = var.aws_endpoint # fake endpoint
  ssm_endpoint        = var.aws_endpoint # fake endpoint
  sts_endpoint        = var.aws_endpoint # fake endpoint
}

source "amazon-ebs" "firstboot" {
  region                     = var.region
  custom_endpoint_ec2        = var.aws_endpoint # fake endpoint
  skip_credential_validation = true             # fake endpoint: amazon-ebs has no STS endpoint setting

  source_ami    = data.dlami.base.ami_id
  instance_type = "p6-b200.48xlarge"
  ssh_username  = "ubuntu"
  ssh_timeout   = "5m"
  ami_name      = "firstboot-${var.mode}-${formatdate("YYYYMMDDhhmmss", timestamp())}"
  ami_regions   = var.mode == "dist-upgrade" ? ["us-west-2"] : []
  tags          = { "dlami:source_ami" = data.dlami.base.ami_id }
}

build {
  name    = "firstboot"
  sources = ["source.amazon-ebs.firstboot"]

  provisioner "dlami" {
    report_dir = var.report_dir

    layer {
      name = "first-boot-script"
      file {
        source      = "first-boot/${var.mode}"
        destination = "/var/lib/cloud/scripts/per-instance/50-${var.mode}"
        mode        = "0755"
      }
    }
  }

  # After the dlami provisioner: nothing it checks sees this.
  provisioner "shell" {
    execute_command = "sudo -n sh -c '{{ .Vars }} {{ .Path }}'"
    inline = var.mode != "grub-1015" ? ["true"] : [
      "apt-get install -y -q linux-image-7.0.0-1015-aws",
      "apt-mark hold linux-image-7.0.0-1015-aws",
      "sed -i 's/^GRUB_DEFAULT=.*/GRUB_DEFAULT=\"Advanced options for Ubuntu>Ubuntu, with Linux 7.0.0-1015-aws\"/' /etc/default/grub",
      "update-grub",
    ]
  }

  post-processor "dlami" {
    region              = var.region
    custom_endpoint_ec2 = var.aws_endpoint # fake endpoint
    sts_endpoint        = var.aws_endpoint # fake endpoint
    bom_file            = "${var.report_dir}/dlami-bom.json"
    report_dir          = "${var.report_dir}/verify"
    on_failure          = var.mode == "dist-upgrade" ? "deregister" : "tag"
    ssh_timeout         = "5m"
    settle_timeout      = "10m"
  }

  # A post-processor sequence of its own that keeps the AMI: Packer deregisters a build's AMI
  # when a post-processor fails unless a sequence kept it. The dist-upgrade run leaves it out
  # (-except=keep-ami) to go through Packer's own deregistration after the dlami
  # post-processor's.
  post-processors {
    post-processor "manifest" {
      name   = "keep-ami"
      output = "${var.report_dir}/packer-manifest.json"
    }
  }
}
