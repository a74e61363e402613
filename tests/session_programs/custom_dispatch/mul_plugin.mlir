// A kernel that calls a function it imports at run time from an executable plugin: after IREE's
// samples/custom_dispatch/cpu/plugin/system_example.mlir (Apache-2.0 WITH LLVM-exception). The plugin
// (simple_mul_workgroup: binding2 = binding0 * binding1) is built by the test; run with
// --executable-plugin=<it> (iree-run-module's --executable_plugin).

module @mul_plugin {
  stream.executable private @executable {
    stream.executable.export public @simple_mul workgroups(%workload: index) -> (index, index, index) {
      %x = affine.apply affine_map<()[s0] -> (s0 ceildiv 64)>()[%workload]
      %c1 = arith.constant 1 : index
      stream.return %x, %c1, %c1 : index, index, index
    }
    builtin.module {
      // No body, no object: imported (by name, from whichever plugin provides it) when the executable loads.
      func.func private @simple_mul_workgroup(
          %binding0: memref<f32>, %binding0_offset : index,
          %binding1: memref<f32>, %binding1_offset : index,
          %binding2: memref<f32>, %binding2_offset : index,
          %dim: index, %tid : index) attributes {
        hal.import.fields = ["processor_id", "processor_data"],
        llvm.bareptr = true
      }
      func.func @simple_mul(%binding0: !stream.binding, %binding1: !stream.binding, %binding2: !stream.binding,
                            %dim: index) {
        %c0 = arith.constant 0 : index
        %workgroup_id_x = stream.dispatch.workgroup.id[0] : index
        %memref0 = stream.binding.subspan %binding0[%c0] : !stream.binding -> memref<?xf32>{%dim}
        %memref1 = stream.binding.subspan %binding1[%c0] : !stream.binding -> memref<?xf32>{%dim}
        %memref2 = stream.binding.subspan %binding2[%c0] : !stream.binding -> memref<?xf32>{%dim}
        %base0, %offset0, %size0, %stride0 = iree_codegen.extract_strided_metadata %memref0
            : memref<?xf32> -> memref<f32>, index, index, index
        %base1, %offset1, %size1, %stride1 = iree_codegen.extract_strided_metadata %memref1
            : memref<?xf32> -> memref<f32>, index, index, index
        %base2, %offset2, %size2, %stride2 = iree_codegen.extract_strided_metadata %memref2
            : memref<?xf32> -> memref<f32>, index, index, index
        func.call @simple_mul_workgroup(%base0, %offset0, %base1, %offset1, %base2, %offset2, %dim, %workgroup_id_x)
            : (memref<f32>, index, memref<f32>, index, memref<f32>, index, index, index) -> ()
        return
      }
    }
  }

  // (lhs * rhs) + rhs: the product by the plugin's function, the sum by a dispatch IREE forms.
  func.func @mul_add(%arg0: tensor<?xf32>, %arg1: tensor<?xf32>) -> tensor<?xf32> {
    %c0 = arith.constant 0 : index
    %dim = tensor.dim %arg0, %c0 : tensor<?xf32>
    %0 = flow.dispatch @executable::@simple_mul[%dim](%arg0, %arg1, %dim) : (tensor<?xf32>{%dim}, tensor<?xf32>{%dim}, index) -> tensor<?xf32>{%dim}
    %1 = arith.addf %0, %arg1 : tensor<?xf32>
    return %1 : tensor<?xf32>
  }
}
