module @module {
  func.func @main(%arg0: !torch.vtensor<[4,6,32],f32>) -> (!torch.vtensor<[4,32],f32>, !torch.vtensor<[4],si64>, !torch.vtensor<[],f32>) attributes {torch.assume_strict_symbolic_shapes} {
    %bool_1 = torch.constant.bool true
    %bool_2 = torch.constant.bool false
    %none_3 = torch.constant.none
    %intm1_4 = torch.constant.int -1
    %0 = torch.prim.ListConstruct %intm1_4 : (!torch.int) -> !torch.list<int>
    %1 = torch.aten.sum.dim_IntList %arg0, %0, %bool_1, %none_3 : !torch.vtensor<[4,6,32],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[4,6,1],f32>
    %float_5 = torch.constant.float 3.200000e+01
    %2 = torch.aten.div.Scalar %1, %float_5 : !torch.vtensor<[4,6,1],f32>, !torch.float -> !torch.vtensor<[4,6,1],f32>
    %int1_6 = torch.constant.int 1
    %3 = torch.aten.sub.Tensor %arg0, %2, %int1_6 : !torch.vtensor<[4,6,32],f32>, !torch.vtensor<[4,6,1],f32>, !torch.int -> !torch.vtensor<[4,6,32],f32>
    %4 = torch.aten.mul.Tensor %3, %3 : !torch.vtensor<[4,6,32],f32>, !torch.vtensor<[4,6,32],f32> -> !torch.vtensor<[4,6,32],f32>
    %5 = torch.aten.mean.dim %4, %0, %bool_1, %none_3 : !torch.vtensor<[4,6,32],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[4,6,1],f32>
    %float_7 = torch.constant.float 1.000000e-05
    %int1_8 = torch.constant.int 1
    %6 = torch.aten.add.Scalar %5, %float_7, %int1_8 : !torch.vtensor<[4,6,1],f32>, !torch.float, !torch.int -> !torch.vtensor<[4,6,1],f32>
    %7 = torch.aten.rsqrt %6 : !torch.vtensor<[4,6,1],f32> -> !torch.vtensor<[4,6,1],f32>
    %8 = torch.aten.mul.Tensor %3, %7 : !torch.vtensor<[4,6,32],f32>, !torch.vtensor<[4,6,1],f32> -> !torch.vtensor<[4,6,32],f32>
    %9 = torch.vtensor.literal(dense_resource<torch_tensor_32_torch.float32> : tensor<32xf32>) : !torch.vtensor<[32],f32>
    %10 = torch.vtensor.literal(dense_resource<torch_tensor_32_torch.float32_1> : tensor<32xf32>) : !torch.vtensor<[32],f32>
    %11 = torch.aten.mul.Tensor %8, %9 : !torch.vtensor<[4,6,32],f32>, !torch.vtensor<[32],f32> -> !torch.vtensor<[4,6,32],f32>
    %int1_9 = torch.constant.int 1
    %12 = torch.aten.add.Tensor %11, %10, %int1_9 : !torch.vtensor<[4,6,32],f32>, !torch.vtensor<[32],f32>, !torch.int -> !torch.vtensor<[4,6,32],f32>
    %int1_10 = torch.constant.int 1
    %13 = torch.prim.ListConstruct %int1_10 : (!torch.int) -> !torch.list<int>
    %14 = torch.aten.sum.dim_IntList %12, %13, %bool_2, %none_3 : !torch.vtensor<[4,6,32],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[4,32],f32>
    %intm1_11 = torch.constant.int -1
    %15 = torch.aten.argmax %14, %intm1_11, %bool_2 : !torch.vtensor<[4,32],f32>, !torch.int, !torch.bool -> !torch.vtensor<[4],si64>
    %int0_12 = torch.constant.int 0
    %16 = torch.prim.ListConstruct %int0_12 : (!torch.int) -> !torch.list<int>
    %17 = torch.aten.amax %14, %16, %bool_2 : !torch.vtensor<[4,32],f32>, !torch.list<int>, !torch.bool -> !torch.vtensor<[32],f32>
    %18 = torch.aten.sum %17, %none_3 : !torch.vtensor<[32],f32>, !torch.none -> !torch.vtensor<[],f32>
    return %14, %15, %18 : !torch.vtensor<[4,32],f32>, !torch.vtensor<[4],si64>, !torch.vtensor<[],f32>
  }
}

{-#
  dialect_resources: {
    builtin: {
      torch_tensor_32_torch.float32: "0x040000005FBC4E3F59F0583F30C3303F92D2BA3F5EDDA63F7961763FA1A7433F38A5BB3FFE95653FCDF0353F48B66C3F2E0C9C3FCDA5A23F7AE61B3F4214B93F5658963FB9FF0F3F1E31AB3F5767BC3F513BAB3F4381023F5B1C793F0C6A8B3FF1A9B13F755A803F7ECB133FC47DB73F7BD2B93F20757C3F6CAE0D3FC560AB3F21EF9E3F",
      torch_tensor_32_torch.float32_1: "0x040000001BF7833E1DD0DEBCE1D70EBE0633A6BC7C9305BF5EEDB5BEB100353E6EEA8C3D85B1A03C8ACB57BEFF46DB3D93BBB03ED2CA82BE1B1BFABBC6F5C7BDE1FE7B3D443001BC0E5924BDADA73FBE580464BCB4DD08BE352A24BDDA88C0BC8CE1F53D5B5102BE60979ABDC87A503E27175FBD406B81BD7EF1253E4304333DC112F43B"
    }
  }
#-}
