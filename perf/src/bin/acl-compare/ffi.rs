//! The few DPDK 22.11 functions and structures `acl-compare` uses (`rte_eal.h`, `rte_acl.h`),
//! and a safe owner of an `rte_acl` context. The only module of wasp-perf with `unsafe`.
#![allow(unsafe_code)]

use std::ffi::{CString, c_char, c_int, c_void};

use wasp_perf::acl::{AclLayout, AclRule};

/// `RTE_ACL_MAX_FIELDS`.
const MAX_FIELDS: usize = 64;
/// `SOCKET_ID_ANY`.
const SOCKET_ID_ANY: c_int = -1;

/// `struct rte_acl_field_def`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FieldDef {
    kind: u8,
    size: u8,
    field_index: u8,
    input_index: u8,
    offset: u32,
}

/// `struct rte_acl_config`.
#[repr(C)]
struct Config {
    num_categories: u32,
    num_fields: u32,
    defs: [FieldDef; MAX_FIELDS],
    max_size: usize,
}

/// `struct rte_acl_param`.
#[repr(C)]
struct Param {
    name: *const c_char,
    socket_id: c_int,
    rule_size: u32,
    max_rule_num: u32,
}

/// `struct rte_acl_field`: two `union rte_acl_field_types` (u8/u16/u32/u64), written as u64
/// (the narrower members are its low bytes on this little-endian target).
#[repr(C)]
#[derive(Clone, Copy)]
struct Field {
    value: u64,
    mask_range: u64,
}

/// `struct rte_acl_rule_data`.
#[repr(C)]
#[derive(Clone, Copy)]
struct RuleData {
    category_mask: u32,
    priority: i32,
    userdata: u32,
}

/// One 16-byte slot of a rule: the first slot of a rule holds its `rte_acl_rule_data`
/// (padded to 16 bytes, as `struct rte_acl_rule` is, since its fields are 8-aligned), the next
/// ones its fields: a rule of `n` fields is `RTE_ACL_RULE_SZ(n) = 16 + 16 n` bytes.
#[repr(C)]
#[derive(Clone, Copy)]
union Slot {
    head: RuleData,
    field: Field,
}

const _: () = {
    assert!(cfg!(target_endian = "little"));
    assert!(size_of::<FieldDef>() == 8);
    assert!(size_of::<Config>() == 8 + 8 * MAX_FIELDS + 8);
    assert!(size_of::<Param>() == 24);
    assert!(size_of::<Slot>() == 16 && align_of::<Slot>() == 8);
};

/// `enum rte_acl_classify_alg` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Alg {
    /// `RTE_ACL_CLASSIFY_SCALAR`.
    Scalar = 1,
    /// `RTE_ACL_CLASSIFY_SSE`.
    Sse = 2,
    /// `RTE_ACL_CLASSIFY_AVX2`.
    Avx2 = 3,
    /// `RTE_ACL_CLASSIFY_AVX512X16`.
    Avx512x16 = 6,
    /// `RTE_ACL_CLASSIFY_AVX512X32`.
    Avx512x32 = 7,
}

#[repr(C)]
struct RteAclCtx {
    _opaque: [u8; 0],
}

#[link(name = "rte_eal")]
unsafe extern "C" {
    fn rte_eal_init(argc: c_int, argv: *mut *mut c_char) -> c_int;
}

#[link(name = "rte_acl")]
unsafe extern "C" {
    fn rte_acl_create(param: *const Param) -> *mut RteAclCtx;
    fn rte_acl_add_rules(ctx: *mut RteAclCtx, rules: *const c_void, num: u32) -> c_int;
    fn rte_acl_build(ctx: *mut RteAclCtx, cfg: *const Config) -> c_int;
    fn rte_acl_set_ctx_classify(ctx: *mut RteAclCtx, alg: u32) -> c_int;
    fn rte_acl_classify(
        ctx: *const RteAclCtx,
        data: *const *const u8,
        results: *mut u32,
        num: u32,
        categories: u32,
    ) -> c_int;
    fn rte_acl_free(ctx: *mut RteAclCtx);
}

/// Starts DPDK's EAL with `args` (after a program name). Call once, before [`Acl::build`].
pub fn eal_init(args: &[&str]) -> Result<(), String> {
    let mut argv: Vec<*mut c_char> = std::iter::once("acl-compare")
        .chain(args.iter().copied())
        .map(|a| CString::new(a).expect("no NUL in EAL arguments").into_raw())
        .collect();
    // The strings are leaked on purpose: EAL may keep pointers to them.
    // SAFETY: argv holds argc valid NUL-terminated strings that live for the whole process;
    // rte_eal_init may permute the pointer array, which we own and no longer read.
    let rc = unsafe { rte_eal_init(argv.len() as c_int, argv.as_mut_ptr()) };
    if rc < 0 {
        Err(format!("rte_eal_init failed ({rc})"))
    } else {
        Ok(())
    }
}

/// A built `rte_acl` context (one category), freed on drop.
pub struct Acl {
    ctx: *mut RteAclCtx,
    stride: usize,
}

impl Acl {
    /// Creates a context named `name`, adds `rules` laid out as `layout` says and builds it.
    pub fn build(name: &str, layout: &AclLayout, rules: &[AclRule]) -> Result<Acl, String> {
        let nf = layout.defs.len();
        if nf > MAX_FIELDS {
            return Err(format!("{nf} fields, rte_acl takes {MAX_FIELDS}"));
        }
        let cname = CString::new(name).map_err(|e| e.to_string())?;
        let param = Param {
            name: cname.as_ptr(),
            socket_id: SOCKET_ID_ANY,
            rule_size: (16 * (1 + nf)) as u32,
            max_rule_num: rules.len() as u32,
        };
        // SAFETY: param points to a valid rte_acl_param whose name outlives the call (DPDK
        // copies the name into the context).
        let ctx = unsafe { rte_acl_create(&param) };
        if ctx.is_null() {
            return Err("rte_acl_create failed".into());
        }
        let acl = Acl {
            ctx,
            stride: layout.stride,
        };
        let mut slots: Vec<Slot> = Vec::with_capacity(rules.len() * (1 + nf));
        for r in rules {
            slots.push(Slot {
                head: RuleData {
                    category_mask: 1,
                    priority: r.priority,
                    userdata: r.userdata,
                },
            });
            for f in &r.fields {
                slots.push(Slot {
                    field: Field {
                        value: f.value,
                        mask_range: f.mask_range,
                    },
                });
            }
        }
        // SAFETY: ctx is a live context created with rule_size 16 * (1 + nf); slots holds
        // rules.len() rules of exactly that size, 8-aligned, read only during the call.
        let rc = unsafe { rte_acl_add_rules(acl.ctx, slots.as_ptr().cast(), rules.len() as u32) };
        if rc != 0 {
            return Err(format!("rte_acl_add_rules failed ({rc})"));
        }
        let mut cfg = Config {
            num_categories: 1,
            num_fields: nf as u32,
            defs: [FieldDef::default(); MAX_FIELDS],
            max_size: 0,
        };
        for (i, d) in layout.defs.iter().enumerate() {
            cfg.defs[i] = FieldDef {
                kind: d.kind,
                size: d.size,
                field_index: i as u8,
                input_index: d.input,
                offset: d.offset,
            };
        }
        // SAFETY: ctx is live and holds the rules; cfg is a valid rte_acl_config read only
        // during the call.
        let rc = unsafe { rte_acl_build(acl.ctx, &cfg) };
        if rc != 0 {
            return Err(format!("rte_acl_build failed ({rc})"));
        }
        Ok(acl)
    }

    /// Selects the classify algorithm; `false` when this CPU or EAL's SIMD width refuses it.
    pub fn set_alg(&mut self, alg: Alg) -> bool {
        // SAFETY: ctx is a live context; the call only stores the algorithm after checking it.
        unsafe { rte_acl_set_ctx_classify(self.ctx, alg as u32) == 0 }
    }

    /// Classifies the input buffers `range` of `inputs` into `results` (userdata of the best
    /// matching rule, 0 for none), one call of `rte_acl_classify`.
    ///
    /// # Panics
    /// When `inputs` has another stride than this context's layout, `range` is out of bounds
    /// or `results` is not as long as `range`.
    pub fn classify(&self, inputs: &Inputs, range: std::ops::Range<usize>, results: &mut [u32]) {
        assert_eq!(inputs.stride, self.stride);
        let data = &inputs.ptrs[range];
        assert_eq!(data.len(), results.len());
        // SAFETY: ctx is a built context; every pointer in data points to an input buffer of
        // the layout's stride inside inputs.buf (the classifier reads only inside it), which
        // inputs keeps alive and unmodified; results has room for one u32 per buffer and one
        // category.
        let rc = unsafe {
            rte_acl_classify(
                self.ctx,
                data.as_ptr(),
                results.as_mut_ptr(),
                data.len() as u32,
                1,
            )
        };
        debug_assert_eq!(rc, 0);
    }
}

/// Input buffers for [`Acl::classify`] and the pointers to them.
pub struct Inputs {
    #[allow(dead_code)] // owns what ptrs point into
    buf: Vec<u8>,
    ptrs: Vec<*const u8>,
    stride: usize,
}

impl Inputs {
    /// The keys (packed back to back) laid out by `layout`.
    pub fn new(layout: &AclLayout, keys: &[u8]) -> Inputs {
        let buf = layout.inputs(keys);
        let ptrs = buf
            .chunks_exact(layout.stride)
            .map(|c| c.as_ptr())
            .collect();
        Inputs {
            buf,
            ptrs,
            stride: layout.stride,
        }
    }

    /// Number of input buffers.
    pub fn len(&self) -> usize {
        self.ptrs.len()
    }
}

impl Drop for Acl {
    fn drop(&mut self) {
        // SAFETY: ctx was created by rte_acl_create and is freed once, here.
        unsafe { rte_acl_free(self.ctx) };
    }
}
