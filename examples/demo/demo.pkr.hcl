# The simulated demo (run it with `make demo`, which calls ./run). Everything here is real
# Packer, the real plugin and real apt; only the outside world is simulated:
#
#   - AWS is a local fake endpoint (cmd/dlami-fake-aws) speaking the real SSM and EC2 wire
#     protocols, reached through ssm_endpoint/ec2_endpoint with throwaway static credentials;
#   - the build VM is a Debian root filesystem dressed as a P6-B200 Base OSS DLAMI
#     (test/simhost), reached over real SSH as `ubuntu` with passwordless sudo, through a
#     `null` source instead of `amazon-ebs`.
#
# To run against real AWS, see examples/golden-slurm: drop the endpoint and credential
# settings (use your AWS credentials), replace the null source by amazon-ebs with
# source_ami = data.dlami.base.ami_id, and add the amazon plugin to required_plugins.

packer {
  required_version = ">= 1.16.0"
  required_plugins {
    dlami = {
      source  = "github.com/dlami-bake/dlami"
      version = ">= 0.1.0"
    }
  }
}

variable "ssh_host" {
  type = string
}

variable "ssh_port" {
  type = number
}

variable "ssh_private_key_file" {
  type = string
}

variable "report_dir" {
  type = string
}

variable "aws_endpoint" {
  type        = string
  description = "URL of the local fake AWS endpoint (SSM and EC2)."
}

variable "region" {
  type    = string
  default = "us-east-1"
}

data "dlami" "base" {
  region = var.region

  # Simulation only: the fake endpoint and throwaway credentials it accepts.
  ssm_endpoint = var.aws_endpoint
  ec2_endpoint = var.aws_endpoint
  access_key   = "AKIAFAKEDEMO00000000"
  secret_key   = "fake-secret-for-the-local-demo-endpoint"
}

source "null" "dlami" {
  communicator         = "ssh"
  ssh_host             = var.ssh_host
  ssh_port             = var.ssh_port
  ssh_username         = "ubuntu"
  ssh_private_key_file = var.ssh_private_key_file
  ssh_timeout          = "2m"
}

build {
  name    = "demo"
  sources = ["source.null.dlami"]

  provisioner "shell-local" {
    inline = [
      "echo 'dlami data source: ${data.dlami.base.ami_id} = ${data.dlami.base.name} (build ${data.dlami.base.build}, owner ${data.dlami.base.owner_id}, root ${data.dlami.base.root_device_name})'",
    ]
  }

  provisioner "dlami" {
    report_dir    = var.report_dir
    instance_type = "p6-b200.48xlarge"

    # Real Debian packages through real apt, on a host whose kernel and driver packages are
    # held and whose apt repository offers a newer kernel: the guard proves nothing moved.
    layer {
      name         = "slurm"
      apt_packages = ["slurmd", "munge"]
      inline = [
        "slurmd -V",
        "dpkg-query -W -f='$${Package} $${Version}\\n' slurmd munge",
      ]
    }

    expect {
      kernel        = "7.0.0-1014-aws"
      nvidia_driver = "595.91.07"
      efa_driver    = ">= 3.3.0"
      efa_installer = ">= 1.50.0"
      libfabric     = ">= 2.6.0"
      aws_ofi_nccl  = ">= 1.21.1"
      gpu_count     = 8
      gpu_model     = "B200"
      efa_count     = 8
    }
  }
}
