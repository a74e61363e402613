module @module {
  func.func @main(%arg0: !torch.vtensor<[2,5],si64>, %arg1: !torch.vtensor<[2,5],i1>) -> (!torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],i1>) attributes {torch.assume_strict_symbolic_shapes} {
    %0 = torch.vtensor.literal(dense_resource<torch_tensor_20_8_torch.float32> : tensor<20x8xf32>) : !torch.vtensor<[20,8],f32>
    %bool_1 = torch.constant.bool false
    %bool_2 = torch.constant.bool true
    %intm1_3 = torch.constant.int -1
    %1 = torch.aten.embedding %0, %arg0, %intm1_3, %bool_1, %bool_1 : !torch.vtensor<[20,8],f32>, !torch.vtensor<[2,5],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,5,8],f32>
    %intm1_4 = torch.constant.int -1
    %2 = torch.aten.unsqueeze %arg1, %intm1_4 : !torch.vtensor<[2,5],i1>, !torch.int -> !torch.vtensor<[2,5,1],i1>
    %float_5 = torch.constant.float 0.000000e+00
    %3 = torch.aten.where.ScalarOther %2, %1, %float_5 : !torch.vtensor<[2,5,1],i1>, !torch.vtensor<[2,5,8],f32>, !torch.float -> !torch.vtensor<[2,5,8],f32>
    %int1_6 = torch.constant.int 1
    %4 = torch.prim.ListConstruct %int1_6 : (!torch.int) -> !torch.list<int>
    %none_7 = torch.constant.none
    %5 = torch.aten.sum.dim_IntList %3, %4, %bool_1, %none_7 : !torch.vtensor<[2,5,8],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[2,8],f32>
    %int6_8 = torch.constant.int 6
    %6 = torch.aten.sum.dim_IntList %arg1, %4, %bool_2, %int6_8 : !torch.vtensor<[2,5],i1>, !torch.list<int>, !torch.bool, !torch.int -> !torch.vtensor<[2,1],f32>
    %7 = torch.aten.div.Tensor %5, %6 : !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,1],f32> -> !torch.vtensor<[2,8],f32>
    %8 = torch.aten.gt.Scalar %7, %float_5 : !torch.vtensor<[2,8],f32>, !torch.float -> !torch.vtensor<[2,8],i1>
    return %7, %8 : !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],i1>
  }
}

{-#
  dialect_resources: {
    builtin: {
      torch_tensor_20_8_torch.float32: "0x04000000C9DB26BF17E932BEE8F4D43FE8BD283F4E19D2BF2580AABB529B1FBFDD32183E19D9CDBF0C93773EB207713E1DAEC93F4C1FA23E30B3023F731EBFBFB72C1040E033F5BFD8078D3F30E9A8BE0D7261BF4B0228BF27092CBF25A8C23E7466E1BDE4C4BD3F7730EABF02EA49BBC55D64BF8A9F463F4C8E07C0B5F8AFBE9237573E83FCBDBF17377C3FA700373EAFE0803F248D753FC0D77ABF583C4CBF643650BE4A7A3F3FFED8593FE8AD35BF46711BBF1F3E4CBFA39015BF30A273BE86FA06BE26B80340ACA301BFAED393BEB3CAEA3EA9FC73BFB3BCBCBEC2355A3C6E2E463F2D73A8BF508CAF3F4B75B4BE807B2D3EC7DA583FBA29293FE994873FC55A313E2FACA0BC7A09A23E34E77EBF7E6A9B3FB77F46BFAC4FA1BF349C034039B80BBE90ED96BF2D17ED3F18D0A8BE19F2873F5F5954BF31C07EBEBB21D8BF2058F4BF9EF779BFECD29FBDCB484C3F32471B40161484BF3C28813F17B61ABFA4301CBEB097BDBF684FBDBF324947BFD9B798BFC8F068BBFDD733BFD716A03F33B11C3E3334293E7A97913F01A3043F78EA18BD2BCDB9BDEBB3F7BD06D2893F4D78483F9959BB3E14804C3F89660BBF64D2023F59C7B4BF5D73AC3F396BB83D60CB3B3E3871193FE8141FBC6E1A82BEDD4A983FB00EED3D91766ABFDE0DE13E6341DABFD1E8D33FFF3C2FBEB5F03B3D507F104020B609400D2CED3D3EF71F3F048B8B3F774CD73F383D06BEA7810A3ED0C09C3F7F028A3EE726413FC11F1C3FCB4491BF8FE35BBFB20B29C08A2E85BE065FAB3F7DFA8DBF47ED9D3F42E27F3F33A260BD196BF9BB6CA4A93D31705CBF9C8D90BE37BA3EBDF7A71C3F3FB44A3F15243EBFF061533F862247BF75F82CBECE2FBD3E9E93B9BC050202BE34F4893E3D840DBF"
    }
  }
#-}
