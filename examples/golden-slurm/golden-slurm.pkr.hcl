# A golden Slurm compute-node AMI on the AWS Deep Learning Base OSS DLAMI (Ubuntu 24.04).
#
#   packer init .
#   packer build -var 'subnet_id=subnet-0123456789abcdef0' -var-file checksums.pkrvars.hcl .
#
# checksums.pkrvars.hcl holds the SHA-256 of the enroot packages and the pyxis source the image
# gets (enroot_deb_sha256, enroot_caps_deb_sha256, pyxis_tarball_sha256; see variables.pkr.hcl):
# the enroot-pyxis layer refuses a download that does not match.
#
# The DLAMI already carries the matched kernel, NVIDIA driver, Fabric Manager, EFA, GDRCopy,
# NVIDIA Container Toolkit and Lustre client. This template only adds Slurm and enroot/pyxis on
# top, lets the dlami provisioner prove that none of that moved, validates the host against
# pinned versions, installs the node check every boot of the fleet runs, cleans the build's
# keys and identity out of the image, and registers it encrypted, IMDSv2-only and with a
# deprecation date, tagged with the DLAMI build it came from.
#
# Slurm: the image gets the slurmd of Ubuntu 24.04's archive, Slurm 23.11 (23.11.4-1.2ubuntu5,
# https://packages.ubuntu.com/noble/slurmd); the slurm layer fails the bake if the archive
# serves another major release than slurm_major. slurmd must be no newer than the cluster's
# slurmctld and at most two major releases older (three for a slurmctld of 24.11 or later):
# Slurm's "Compatibility window", https://slurm.schedmd.com/upgrades.html. So a 23.11 slurmd
# joins a slurmctld of 23.11, 24.05, 24.11 or 25.05, not 25.11; for a newer controller, install
# a newer Slurm in the layer (SchedMD's packages) and move slurm_major with it.

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

data "dlami" "base" {
  region = var.region
  # Pinned: the expect block below names this build's kernel and driver, so the latest DLAMI
  # would fail the bake the day AWS publishes a new one. Move dlami_build, expect_kernel and
  # expect_nvidia_driver together (the rebake example follows the latest build instead, with
  # no pinned kernel or driver).
  build = var.dlami_build
}

locals {
  # The name uses no data source output: `packer validate` (without -evaluate-datasources)
  # sees those as "<unknown>", which is not a valid AMI name. The tags below record the build.
  ami_name = "golden-slurm-${replace(var.instance_type, ".", "-")}-${formatdate("YYYYMMDDhhmm", timestamp())}"
  tags = {
    Name                    = local.ami_name
    "dlami:family"          = "golden-slurm-${var.instance_type}"
    "dlami:source_ami"      = data.dlami.base.ami_id
    "dlami:source_ami_name" = data.dlami.base.name
    "dlami:build"           = data.dlami.base.build
    "dlami:source_region"   = var.region
    "dlami:slurm"           = "ubuntu-archive-${var.slurm_major}"
    "dlami:enroot"          = var.enroot_version
    "dlami:pyxis"           = var.pyxis_version
  }
}

source "amazon-ebs" "golden" {
  region        = var.region
  source_ami    = data.dlami.base.ami_id
  instance_type = var.instance_type
  subnet_id     = var.subnet_id
  ssh_username  = "ubuntu"
  # P-instances take a while to pass status checks.
  ssh_timeout = "30m"

  ami_name        = local.ami_name
  ami_description = "Slurm + enroot/pyxis on ${data.dlami.base.name}"
  ami_regions     = var.ami_regions
  ena_support     = true

  # Instances launched from the AMI get IMDSv2 only (session tokens), whatever the launch asks;
  # the build instance requires it too. The dlami post-processor's verification instance
  # requires it by default, so a first boot that needs IMDSv1 fails there, not in the fleet.
  imds_support = "v2.0"
  metadata_options {
    http_endpoint = "enabled"
    http_tokens   = "required"
  }

  # The AMI's snapshots encrypted with kms_key_id ("" = the region's aws/ebs key); each
  # ami_regions copy with region_kms_key_ids[region] (a customer managed key lives in one
  # region), else that region's aws/ebs key. The post-processor's role needs the key
  # permissions its docs list ("IAM permissions") to launch the encrypted AMI.
  encrypt_boot       = true
  kms_key_id         = var.kms_key_id
  region_kms_key_ids = var.region_kms_key_ids

  # EC2 marks the AMI deprecated after deprecate_after: the next rebake replaces it long
  # before, and a launch template still pointing at it shows the warning.
  deprecate_at = timeadd(timestamp(), var.deprecate_after)

  launch_block_device_mappings {
    # The DLAMI's root device name, not a hard-coded /dev/sda1 or /dev/xvda.
    device_name           = data.dlami.base.root_device_name
    volume_size           = var.root_volume_gb
    volume_type           = "gp3"
    delete_on_termination = true
  }

  tags          = local.tags
  snapshot_tags = local.tags
  run_tags      = merge(local.tags, { Name = "packer ${local.ami_name}" })
}

build {
  name    = "golden-slurm"
  sources = ["source.amazon-ebs.golden"]

  provisioner "dlami" {
    report_dir    = var.report_dir
    instance_type = var.instance_type

    # Slurm from the distribution (Ubuntu 24.04: Slurm 23.11, see the top of this file). The
    # munge key and slurm.conf come from the cluster at boot (configless slurmd: --conf-server
    # in /etc/default/slurmd, written by user-data), so the AMI carries no cluster secret.
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
        # The Slurm release the cluster's slurmctld was checked against, or the bake fails.
        "v=$(slurmd -V) && case \"$v\" in \"slurm $SLURM_MAJOR.\"*) echo \"$v\" ;; *) echo \"slurmd is '$v', not $SLURM_MAJOR: check the cluster's slurmctld accepts it, then move slurm_major\" >&2; exit 1 ;; esac",
        "systemctl enable munge",
        # slurmd starts once user-data has installed the munge key and conf server.
        "systemctl disable slurmd",
      ]
    }

    # enroot + pyxis: container jobs under Slurm (srun --container-image=...).
    layer {
      name    = "enroot-pyxis"
      scripts = ["${path.root}/scripts/enroot-pyxis.sh"]
      environment = {
        ENROOT_VERSION         = var.enroot_version
        ENROOT_DEB_SHA256      = var.enroot_deb_sha256
        ENROOT_CAPS_DEB_SHA256 = var.enroot_caps_deb_sha256
        PYXIS_VERSION          = var.pyxis_version
        PYXIS_TARBALL_SHA256   = var.pyxis_tarball_sha256
      }
    }

    # Pinned expectations, of the pinned dlami_build: the bake fails if the host differs from
    # what that build ships. Bump them with dlami_build, after a review of its release notes.
    expect {
      kernel        = var.expect_kernel
      nvidia_driver = var.expect_nvidia_driver
      efa_driver    = ">= 3.3.0"
      efa_installer = ">= 1.50.0"
      libfabric     = ">= 2.6.0"
      aws_ofi_nccl  = ">= 1.21.1"
    }

    # Every boot of every node judges itself before slurmd starts: the host suite, the node
    # against this bake's bill of materials, memlock where jobs run. A failing node never
    # starts slurmd ("block"), so Slurm never schedules on it; the journal, the reports in
    # /var/lib/dlami-node-check and the node_exporter textfile say why. Once slurmd runs,
    # Slurm's own health check drains a node that fails later (slurm.conf:
    # HealthCheckProgram=/usr/local/sbin/dlami-node-check-slurm, see the provisioner's docs).
    node_check {
      action  = "block"
      before  = ["slurmd.service"]
      timeout = "5m"
    }

    # The last step on the build instance: the build's SSH key, the host keys, the machine id,
    # cloud-init's instance state, logs and shell history leave the image, and the
    # image-hygiene check reads them back. Nothing after this provisioner may need SSH.
    image_hygiene = true
  }

  # The registered AMI's first boot on a fresh instance of the same type: tags the AMI (and its
  # ami_regions copies) dlami:verified = true, or deregisters it (with its snapshots, in every
  # region) when its first boot differs from what was baked. When the first boot cannot be
  # judged (no capacity, SSH, credentials), the post-processor fails the build without touching
  # the AMI; Packer would then deregister it (keep_input_artifact is not read from a failed
  # post-processor), so the manifest below, a sequence of its own, keeps it: registered,
  # without dlami:verified, which verified-only launch templates and the rebake lookup ignore.
  post-processor "dlami" {
    region         = var.region
    instance_type  = var.instance_type
    subnet_id      = var.subnet_id
    bom_file       = "${var.report_dir}/dlami-bom.json"
    report_dir     = "${var.report_dir}/first-boot"
    on_failure     = "deregister"
    settle_timeout = "20m"
    # Every EFA interface of the type, in the EC2 User Guide's layout (the default): amazon-ebs
    # attaches none, so the EFA devices, their traffic and GPUDirect RDMA are proven here. With
    # several interfaces EC2 gives no public IP: a temporary Elastic IP reaches the instance
    # unless ssh_interface = "private_ip" or ssh_bastion_host says otherwise.
    efa = "all"
    # The fleet's IMDS rule, as the AMI's imds_support says (also the default).
    metadata_options {
      http_tokens = "required"
    }
  }

  post-processor "manifest" {
    output     = "${var.report_dir}/packer-manifest.json"
    strip_path = true
    custom_data = {
      source_ami = data.dlami.base.ami_id
      dlami      = data.dlami.base.name
      build      = data.dlami.base.build
    }
  }
}
