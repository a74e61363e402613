// A hand-written dispatch whose work is done by a function from an object file, beside one IREE forms: after
// IREE's samples/custom_dispatch/cpu/embedded/example_hal.mlir (Apache-2.0 WITH LLVM-exception). The object
// (functions_x86_64.o, simple_mul_workgroup) is built by the test; compile with
// --iree-hal-executable-object-search-path=<its folder>.

#x86_64_target = #hal.executable.target<"llvm-cpu", "embedded-elf-x86_64", {
  data_layout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-f80:128-n8:16:32:64-S128",
  native_vector_size = 32 : index,
  target_triple = "x86_64-none-elf"
}>

#cpu_target = #hal.device.target<"local", [
  #x86_64_target
]> : !hal.device

// Written over several lines, as by hand: binding 0 and 1 are read, binding 2 written.
#pipeline_layout = #hal.pipeline.layout<constants = 1, bindings = [
  #hal.pipeline.binding<storage_buffer, ReadOnly>,
  #hal.pipeline.binding<storage_buffer, ReadOnly>,
  #hal.pipeline.binding<storage_buffer>
]>

module @mul_object attributes {hal.device.targets = [#cpu_target]} {

  hal.executable private @executable {
    hal.executable.variant public @x86_64 target(#x86_64_target) objects([
      #hal.executable.object<{path = "functions_x86_64.o"}>
    ]) {
      hal.executable.export public @simple_mul ordinal(0) layout(#pipeline_layout) count(%device: !hal.device, %workload: index) -> (index, index, index) {
        %x = affine.apply affine_map<()[s0] -> (s0 ceildiv 64)>()[%workload]
        %c1 = arith.constant 1 : index
        hal.return %x, %c1, %c1 : index, index, index
      }
      builtin.module {
        func.func private @simple_mul_workgroup(
            %binding0: memref<f32>, %binding0_offset: index,
            %binding1: memref<f32>, %binding1_offset: index,
            %binding2: memref<f32>, %binding2_offset: index,
            %dim: index, %tid: index) attributes {
          hal.import.static,
          llvm.bareptr = true
        }
        func.func @simple_mul() {
          %c0 = arith.constant 0 : index
          %dim_i32 = hal.interface.constant.load layout(#pipeline_layout) ordinal(0) : i32
          %dim = arith.index_castui %dim_i32 : i32 to index
          %workgroup_id_x = hal.interface.workgroup.id[0] : index
          %tid = affine.apply affine_map<()[s0] -> (s0 * 64)>()[%workgroup_id_x]
          %binding0 = hal.interface.binding.subspan layout(#pipeline_layout) binding(0) alignment(64) offset(%c0) : memref<?xf32>{%dim}
          %binding1 = hal.interface.binding.subspan layout(#pipeline_layout) binding(1) alignment(64) offset(%c0) : memref<?xf32>{%dim}
          %binding2 = hal.interface.binding.subspan layout(#pipeline_layout) binding(2) alignment(64) offset(%c0) : memref<?xf32>{%dim}
          %base0, %offset0, %sizes0, %strides0 = iree_codegen.extract_strided_metadata %binding0
              : memref<?xf32> -> memref<f32>, index, index, index
          %base1, %offset1, %sizes1, %strides1 = iree_codegen.extract_strided_metadata %binding1
              : memref<?xf32> -> memref<f32>, index, index, index
          %base2, %offset2, %sizes2, %strides2 = iree_codegen.extract_strided_metadata %binding2
              : memref<?xf32> -> memref<f32>, index, index, index
          func.call @simple_mul_workgroup(%base0, %offset0, %base1, %offset1, %base2, %offset2, %dim, %tid)
              : (memref<f32>, index, memref<f32>, index, memref<f32>, index, index, index) -> ()
          return
        }
      }
    }
  }

  // (lhs * rhs) + rhs: the product by the object's function, the sum by a dispatch IREE forms.
  func.func @mul_add(%arg0: tensor<?xf32>, %arg1: tensor<?xf32>) -> tensor<?xf32> {
    %c0 = arith.constant 0 : index
    %dim = tensor.dim %arg0, %c0 : tensor<?xf32>
    %dim_i32 = arith.index_cast %dim : index to i32
    %0 = flow.dispatch @executable::@x86_64::@simple_mul[%dim](%dim_i32, %arg0, %arg1) {
      hal.executable.ref = [@executable]
    } : (i32, tensor<?xf32>{%dim}, tensor<?xf32>{%dim}) -> tensor<?xf32>{%dim}
    %1 = arith.addf %0, %arg1 : tensor<?xf32>
    return %1 : tensor<?xf32>
  }
}
