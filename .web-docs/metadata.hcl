# Metadata the Packer integrations registry reads; the components' docs are compiled into
# ./components by `make generate` from docs/ (do not edit them by hand).
integration {
  name        = "DLAMI"
  description = "Bake golden GPU AMIs on the AWS Deep Learning Base OSS DLAMI: resolve and verify the base, layer software behind a kernel-hold guard, validate the GPU host layer and run a 1-node NCCL test, then verify the registered AMI's first boot on a fresh instance and tag it verified."
  identifier  = "packer/dlami-bake/dlami"
  docs {
    process_docs    = true
    readme_location = "./README.md"
    external_url    = "https://github.com/dlami-bake/packer-plugin-dlami"
  }
  license {
    type = "MPL-2.0"
    url  = "https://github.com/dlami-bake/packer-plugin-dlami/blob/main/LICENSE"
  }
  component {
    type = "data-source"
    name = "DLAMI"
    slug = "dlami"
  }
  component {
    type = "provisioner"
    name = "DLAMI"
    slug = "dlami"
  }
  component {
    type = "post-processor"
    name = "DLAMI"
    slug = "dlami"
  }
}
