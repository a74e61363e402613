module @module {
  func.func @main(%arg0: !torch.vtensor<[?,16],f32>) -> !torch.vtensor<[?,4],f32> {
    %s0 = torch.symbolic_int "s0" {min_val = 2, max_val = 64} : !torch.int
    torch.bind_symbolic_shape %arg0, [%s0], affine_map<()[s0] -> (s0, 16)> : !torch.vtensor<[?,16],f32>
    %0 = torch.vtensor.literal(dense_resource<torch_tensor_8_16_torch.float32> : tensor<8x16xf32>) : !torch.vtensor<[8,16],f32>
    %1 = torch.vtensor.literal(dense_resource<torch_tensor_8_torch.float32> : tensor<8xf32>) : !torch.vtensor<[8],f32>
    %2 = torch.aten.linear %arg0, %0, %1 : !torch.vtensor<[?,16],f32>, !torch.vtensor<[8,16],f32>, !torch.vtensor<[8],f32> -> !torch.vtensor<[?,8],f32>
    torch.bind_symbolic_shape %2, [%s0], affine_map<()[s0] -> (s0, 8)> : !torch.vtensor<[?,8],f32>
    %3 = torch.aten.tanh %2 : !torch.vtensor<[?,8],f32> -> !torch.vtensor<[?,8],f32>
    torch.bind_symbolic_shape %3, [%s0], affine_map<()[s0] -> (s0, 8)> : !torch.vtensor<[?,8],f32>
    %4 = torch.vtensor.literal(dense_resource<torch_tensor_4_8_torch.float32> : tensor<4x8xf32>) : !torch.vtensor<[4,8],f32>
    %5 = torch.vtensor.literal(dense_resource<torch_tensor_4_torch.float32> : tensor<4xf32>) : !torch.vtensor<[4],f32>
    %6 = torch.aten.linear %3, %4, %5 : !torch.vtensor<[?,8],f32>, !torch.vtensor<[4,8],f32>, !torch.vtensor<[4],f32> -> !torch.vtensor<[?,4],f32>
    torch.bind_symbolic_shape %6, [%s0], affine_map<()[s0] -> (s0, 4)> : !torch.vtensor<[?,4],f32>
    %none_1 = torch.constant.none
    %intm1_2 = torch.constant.int -1
    %7 = torch.aten.log_softmax.int %6, %intm1_2, %none_1 : !torch.vtensor<[?,4],f32>, !torch.int, !torch.none -> !torch.vtensor<[?,4],f32>
    torch.bind_symbolic_shape %7, [%s0], affine_map<()[s0] -> (s0, 4)> : !torch.vtensor<[?,4],f32>
    return %7 : !torch.vtensor<[?,4],f32>
  }
}

{-#
  dialect_resources: {
    builtin: {
      torch_tensor_8_16_torch.float32: "0x040000000D4F683D9C9620BE47C9FDBD34813BBFB0370A3F6FBEAF3E96F0C7BDA0B66D3E9DC6AC3D66222ABE8427963E52CEBEBD8707CABDF55873BE5CC30B3E05CAF3BC4083273E07873ABE97D81B3DA50D89BEC03F813EB90E673D531ACB3DAF36FC3D9A409BBEDC97703E6CF41D3F2EAAFBBE9DD104BF6124E7BE833F813E722A1E3D26A2A53E47EE5D3E1560813D5683AE3D099A50BD3F65853E3D86ADBE549801BEFA42953D60590A3FE8D76ABE62BEA5BEB50A2DBE55E1943E2C6390BD726BCB3E6ECF0FBF5657AD3E99F49E3E34E8D9BEAFB83C3D89BDBA3EE111D83CDC8D993E2D64363FD14DA83D5344ACBD02DE6CBEE015473EEEBD71BDBFA45BBDDD5701BDD4A3473E2ECAA3BE31FDEABEF7EB3ABFA81DB83EC45AB53C50F4E73E861630BB7BFD63BEE4D1123E4339BCBCA0A4C0BE3CF287BE4BB0073F88B6D93DF0D3FF3DD3E9A9BDC1E153BE55F5883EA39000BDB13269BE2FD124BDE1198BBE4087693D0A73AD3E356C80BEA36CDB3EC5174DBE4B833C3D0E7880BE928A88BD8E00693C048905BE5AED57BE243F50BEA5427CBE0F2AF1BE8B91A1BDBB78F63DD1878B3E3BCA463E34B93C3F4ACCC33D8F2F0CBED6BD0F3F4ADAA0BE17C2943ED2B592BEF390D93D412C17BFE2208A3E657442BDC9A294BE10E7003FF11D6B3E9927613C0E0065BEC42255BC886F49BDBEA65E3E302B753E80224DBE42C428BE527323BE",
      torch_tensor_8_torch.float32: "0x040000008B2B0ABE1F4F72BDC06617BCC8818D3DF534073E9B8CA5BD14AE613DAD0C36BD",
      torch_tensor_4_8_torch.float32: "0x04000000E0CF843F5792C7BC658B803E53A8EFBE5889CFBE3789CE3DC9A244BE3EE2343EDAE947BF2879A93E5844E6BE5F785C3FFAB113BE2E730C3FD08E32BFD89E5B3EE955E3BE864979BE5A7E493CA65722BE834C073E5966BF3EBB1CA73E7E2933BDE4842EBF4AFDCDBE5174C8BDFFCB87BF5A88C03EB763F5BDECAC00BEC9C8F23E",
      torch_tensor_4_torch.float32: "0x04000000BFC9883D430BB53CB812CDBD1F4CFE3C"
    }
  }
#-}
