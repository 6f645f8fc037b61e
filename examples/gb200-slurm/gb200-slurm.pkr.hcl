# A golden Slurm AMI for P6e-GB200 UltraServer trays (p6e-gb200.36xlarge: 4 Blackwell GPUs and
# Grace arm64 CPUs per tray, 9 or 18 trays sharing one NVLink domain), on the arm64 Base OSS
# DLAMI (Ubuntu 24.04).
#
#   packer init .
#   packer build -var 'capacity_block_id=cr-0123456789abcdef0' -var 'subnet_id=subnet-0123456789abcdef0' .
#
# Why two phases: a p6e-gb200.36xlarge exists only inside an UltraServer, and UltraServers come
# only through EC2 Capacity Blocks for ML (EKS user guide "Use P6e-GB200 UltraServers with Amazon EKS"; ParallelCluster user guide).
# Baking on a tray would spend the block's hours on apt installs and an AMI copy; amazon-ebs
# cannot attach EFA, and a one-tray bake cannot judge the IMEX domain. So amazon-ebs bakes on
# an arm64 CPU instance (Graviton, build_instance_type) started from the same DLAMI: the same
# kernel, driver packages and holds, no GPU. The dlami provisioner guards the holds, runs the
# layers with a drift check after each, writes the bill of materials and defers the host suite
# (defer_validation). The dlami post-processor then launches 2 trays from the registered AMI
# into the Capacity Block, judges each tray's first boot and the deferred checks there
# (complete_validation: nvlink-fabric, imex, the host suite, DCGM, NCCL) and the NCCL test
# across both trays, and tags the AMI dlami:verified = true. A build that drifts fails on the
# CPU instance and touches no block hour.
#
# The Capacity Block: buy one for u-p6e-gb200x36 (9 trays) or u-p6e-gb200x72 (18 trays); its
# reservation id is capacity_block_id, and subnet_id is a subnet in the block's zone (P6e-GB200
# is in Local Zones only). EC2 terminates a block's instances 30 minutes before its end time:
# start the build so that the verification starts at least ssh_timeout + settle_timeout + 30
# minutes before that (see ../two-phase and the post-processor's docs, "Capacity").

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
  type        = string
  description = "The region of the Capacity Block's Local Zone (us-east-1 for Dallas, us-east-1-dfw-2a)."
  default     = "us-east-1"
}

variable "dlami_build" {
  type        = string
  description = "ARM64 Ubuntu 24.04 DLAMI build (YYYYMMDD) to bake on: the build whose kernel and driver the expect block names (20261009: kernel 7.0.0-1014-aws, driver 595.91.07). Move them together, after reviewing the DLAMI release notes."
  default     = "20261009"
}

variable "build_instance_type" {
  type        = string
  description = "The build instance: an arm64 (Graviton) CPU type, no GPU and no Capacity Block needed. It must run arm64: the bake refuses an arm64 DLAMI on an x86_64 type before any layer runs."
  default     = "c8g.8xlarge"
}

variable "capacity_block_id" {
  type        = string
  description = "The UltraServer Capacity Block's reservation id (cr-...): the 2 trays of the verification are launched into it, and EC2 launches p6e-gb200.36xlarge nowhere else."
  validation {
    condition     = can(regex("^cr-[0-9a-f]+$", var.capacity_block_id))
    error_message = "The capacity_block_id must be the Capacity Block's reservation id, cr-... (p6e-gb200.36xlarge exists only inside an UltraServer Capacity Block)."
  }
}

variable "subnet_id" {
  type        = string
  description = "A subnet in the Capacity Block's Availability Zone (a Local Zone for P6e-GB200): EC2 launches into a block only in its zone."
  validation {
    condition     = can(regex("^subnet-[0-9a-f]+$", var.subnet_id))
    error_message = "The subnet_id must be a subnet (subnet-...) in the Capacity Block's Availability Zone."
  }
}

variable "slurm_major" {
  type        = string
  description = "The Slurm major release slurmd must be (Ubuntu 24.04's archive: 23.11). slurmd must be no newer than the cluster's slurmctld and at most two major releases older (three from slurmctld 24.11): https://slurm.schedmd.com/upgrades.html."
  default     = "23.11"
  validation {
    condition     = can(regex("^[0-9]{2}\\.[0-9]{2}$", var.slurm_major))
    error_message = "The slurm_major must be a Slurm major release such as 23.11."
  }
}

variable "report_dir" {
  type    = string
  default = "dlami-reports/gb200-slurm"
}

locals {
  family = "gb200-slurm"
}

data "dlami" "base" {
  region       = var.region
  architecture = "arm64"
  os           = "ubuntu-24.04"
  # Pinned: the expect block names this build's kernel and driver.
  build = var.dlami_build
}

source "amazon-ebs" "golden" {
  region        = var.region
  source_ami    = data.dlami.base.ami_id
  instance_type = var.build_instance_type
  ssh_username  = "ubuntu"
  ssh_timeout   = "15m"
  ami_name      = "${local.family}-${formatdate("YYYYMMDDhhmmss", timestamp())}"
  imds_support  = "v2.0"

  launch_block_device_mappings {
    device_name           = data.dlami.base.root_device_name
    volume_size           = 200
    volume_type           = "gp3"
    delete_on_termination = true
  }

  tags = {
    "dlami:family"       = local.family
    "dlami:source_ami"   = data.dlami.base.ami_id
    "dlami:build"        = data.dlami.base.build
    "dlami:architecture" = data.dlami.base.architecture
    "dlami:slurm"        = "ubuntu-archive-${var.slurm_major}"
  }
}

build {
  name    = "gb200-slurm"
  sources = ["source.amazon-ebs.golden"]

  provisioner "dlami" {
    report_dir = var.report_dir
    # Phase one, on the Graviton build instance: the guard and the layers; the host suite and
    # the NCCL test are deferred to the post-processor (result = deferred, never pass).
    defer_validation = true
    # The image's own nvidia-imex service owns IMEX, as Slurm runs it: a job's prolog writes
    # the job's node IPs into /etc/nvidia-imex/nodes_config.cfg and restarts the service.
    # Written out rather than left to the default of the type that judges it (host on a tray,
    # off on the Graviton build instance): the bill of materials carries it into the
    # verification and every node check.
    imex = "host"

    # Slurm from the distribution (Ubuntu 24.04: Slurm 23.11). The munge key and slurm.conf come
    # from the cluster at boot (configless slurmd: --conf-server in /etc/default/slurmd, written
    # by user-data), so the AMI carries no cluster secret.
    layer {
      name         = "slurm"
      apt_packages = ["slurmd", "slurm-client", "munge"]
      file {
        source      = "${path.root}/files/slurmd.default"
        destination = "/etc/default/slurmd"
      }
      environment = {
        SLURM_MAJOR = var.slurm_major
      }
      inline = [
        "v=$(slurmd -V) && case \"$v\" in \"slurm $SLURM_MAJOR.\"*) echo \"$v\" ;; *) echo \"slurmd is '$v', not $SLURM_MAJOR: check the cluster's slurmctld accepts it, then move slurm_major\" >&2; exit 1 ;; esac",
        "systemctl enable munge",
        # slurmd starts once user-data has installed the munge key and conf server.
        "systemctl disable slurmd",
      ]
    }

    # IMEX: channel 0 created by the driver at every load (NVIDIA's IMEX guide, imexchannels.html:
    # a channel made with mknod does not survive a reboot), in the initramfs too, so it exists
    # before any CUDA job; without it a fabric-handle cuMemCreate fails with
    # CUDA_ERROR_NOT_PERMITTED. The nvidia-imex service enabled (its version must be the
    # driver's: check imex judges that on the trays). Not started here: the build instance has
    # no GPU, and the domain's addresses are a job's, never the image's: nodes_config.cfg stays
    # as the package ships it.
    layer {
      name = "imex"
      inline = [
        "test -x /usr/bin/nvidia-imex || { echo 'nvidia-imex is not installed on this DLAMI build: install the nvidia-imex package of the driver branch in a layer before this one' >&2; exit 1; }",
        "echo 'options nvidia NVreg_CreateImexChannel0=1' >/etc/modprobe.d/nvidia-imex-channel0.conf",
        "update-initramfs -u",
        "systemctl enable nvidia-imex",
      ]
    }

    # Judged in phase two, on the trays (carried in the bill of materials).
    expect {
      architecture      = data.dlami.base.architecture
      kernel            = "7.0.0-1014-aws"
      nvidia_driver     = "595.91.07"
      efa_installer     = ">= 1.50.0"
      gpu_count         = 4
      multi_node_nvlink = true  # nvlink-fabric: every GPU in one clique of the UltraServer's domain
      fabric_manager    = false # a tray runs no Fabric Manager: its NVLink switches sit in other trays
    }

    # The node check every boot of every tray runs before slurmd: nvlink-fabric and IMEX
    # included, so a tray whose fabric did not register never joins Slurm.
    node_check {
      action  = "block"
      before  = ["slurmd.service"]
      timeout = "5m"
    }

    image_hygiene = true
  }

  # Phase two: 2 trays of the UltraServer, launched from the AMI into the Capacity Block.
  post-processor "dlami" {
    region              = var.region
    bom_file            = "${var.report_dir}/dlami-bom.json"
    report_dir          = "${var.report_dir}/verify"
    complete_validation = true
    instance_type       = "p6e-gb200.36xlarge"
    nodes               = 2
    # The block: its reservation as the launch's target, in a subnet of its zone, with the
    # capacity-block market type EC2 requires for a block.
    capacity_reservation_id = var.capacity_block_id
    market_type             = "capacity-block"
    subnet_id               = var.subnet_id
    # Every EFA interface of the type (the default, written out): network card 0 is the ENA
    # primary, every further card an efa-only interface, up to the type's MaximumEfaInterfaces
    # (16 of the 17 cards). Jobs spanning UltraServers talk over EFA alone (no NVLink between
    # them): nccl-multinode proves the EFA path between the two trays.
    efa = "all"
    # The trays' placement is the UltraServer's: no temporary cluster placement group.
    temporary_placement_group = false
    # A tray with several network interfaces gets no public IP: run Packer inside the VPC (a
    # CI runner there), or set ssh_bastion_host.
    ssh_interface  = "private_ip"
    ssh_timeout    = "30m"
    settle_timeout = "15m"
    on_failure     = "deregister"
  }

  # A sequence of its own: when the verification cannot judge the AMI (the block not started
  # yet, SSH), the post-processor fails without touching it and Packer would deregister it;
  # this keeps it, registered without dlami:verified (see ../README.md).
  post-processor "manifest" {
    output     = "${var.report_dir}/packer-manifest.json"
    strip_path = true
  }
}
