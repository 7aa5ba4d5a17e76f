// Package rssmap says which of a Go binary's pages a running process holds,
// and whose they are: by ELF section, and inside .text, .rodata and
// .gopclntab by package. The kernel's pagemap tells which pages of the
// binary's mappings are resident; the symbols of an unstripped build with
// the same flags (the same layout: -s -w only leave out the symbol and
// debug sections) tell what lies on them.
package rssmap

import (
	"bufio"
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

const pageSize = 4096

// Report is where a process's resident binary pages are.
type Report struct {
	// Sections are the loaded sections, in address order.
	Sections []Section
	// ByPackage is the resident bytes of .text, .rodata and .gopclntab by
	// package, each section apart.
	ByPackage map[string]map[string]int64
}

// Section is one loaded section: its size and the bytes of it that are
// resident.
type Section struct {
	Name           string
	Size, Resident int64
}

// Attribute reads which pages of the process's binary are resident and
// assigns them to packages with the symbols of symbolsPath, an unstripped
// build of the binary the process runs.
func Attribute(pid int, symbolsPath string) (*Report, error) {
	f, err := elf.Open(symbolsPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return nil, err
	}
	if err := sameLayout(f, exe); err != nil {
		return nil, err
	}
	present, err := residentPages(pid, exe)
	if err != nil {
		return nil, err
	}
	r := &Report{ByPackage: map[string]map[string]int64{}}
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC == 0 || s.Type == elf.SHT_NOBITS || s.Addr == 0 {
			continue
		}
		r.Sections = append(r.Sections, Section{Name: s.Name, Size: int64(s.Size), Resident: residentBytes(present, s.Addr, s.Addr+s.Size)})
	}
	syms, err := f.Symbols()
	if err != nil {
		return nil, fmt.Errorf("%s has no symbols: build it without -s: %w", symbolsPath, err)
	}
	r.ByPackage[".text"] = bySymbol(f.Section(".text"), syms, present)
	// The symbol table has the type descriptors as one symbol (type:*);
	// DWARF says where each one is.
	types, err := typeSymbols(f, syms)
	if err != nil {
		return nil, err
	}
	r.ByPackage[".rodata"] = bySymbol(f.Section(".rodata"), append(types, syms...), present)
	pcln, err := pclntabByPackage(f, syms, present)
	if err != nil {
		return nil, err
	}
	r.ByPackage[".gopclntab"] = pcln
	return r, nil
}

// sameLayout checks that the running binary's loaded sections are where
// the symbol build has them.
func sameLayout(sym *elf.File, exe string) error {
	run, err := elf.Open(exe)
	if err != nil {
		return err
	}
	defer run.Close()
	for _, s := range run.Sections {
		if s.Flags&elf.SHF_ALLOC == 0 {
			continue
		}
		o := sym.Section(s.Name)
		if o == nil || o.Addr != s.Addr || o.Size != s.Size {
			return fmt.Errorf("the symbol build's section %s differs from the running binary's (%s): build both from the same tree with the same flags but -s -w", s.Name, exe)
		}
	}
	return nil
}

// typeSymbols are the runtime type descriptors DWARF knows, as symbols
// named type:<the type's name>.
func typeSymbols(f *elf.File, syms []elf.Symbol) ([]elf.Symbol, error) {
	// DWARF gives a descriptor's place as an offset from runtime.types.
	var base uint64
	for _, s := range syms {
		if s.Name == "runtime.types" {
			base = s.Value
		}
	}
	if base == 0 {
		return nil, errors.New("the symbol build has no runtime.types")
	}
	d, err := f.DWARF()
	if err != nil {
		return nil, fmt.Errorf("the symbol build has no DWARF: build it without -w: %w", err)
	}
	const attrGoRuntimeType = dwarf.Attr(0x2904) // the address of the type's descriptor
	var out []elf.Symbol
	rd := d.Reader()
	for {
		e, err := rd.Next()
		if err != nil {
			return nil, err
		}
		if e == nil {
			return out, nil
		}
		addr, ok := e.Val(attrGoRuntimeType).(uint64)
		name, _ := e.Val(dwarf.AttrName).(string)
		if ok && addr != 0 && name != "" {
			out = append(out, elf.Symbol{Name: "type:" + name, Value: base + addr})
		}
	}
}

// residentPages is the set of resident pages (by address / pageSize) in
// the process's mappings of the file exe.
func residentPages(pid int, exe string) (map[uint64]bool, error) {
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, err
	}
	defer maps.Close()
	pagemap, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return nil, err
	}
	defer pagemap.Close()
	present := map[uint64]bool{}
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[5] != exe {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		entries := make([]byte, (end-start)/pageSize*8)
		if _, err := pagemap.ReadAt(entries, int64(start/pageSize*8)); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		for i := range (end - start) / pageSize {
			// Bit 63: the page is present in RAM (mapped by this process).
			if binary.LittleEndian.Uint64(entries[i*8:])&(1<<63) != 0 {
				present[start/pageSize+i] = true
			}
		}
	}
	if len(present) == 0 {
		return nil, fmt.Errorf("no resident page of %s in process %d", exe, pid)
	}
	return present, sc.Err()
}

// residentBytes is how many bytes of [start, end) lie on resident pages.
func residentBytes(present map[uint64]bool, start, end uint64) int64 {
	var n int64
	for p := start / pageSize; p*pageSize < end; p++ {
		if present[p] {
			n += int64(min(end, (p+1)*pageSize) - max(start, p*pageSize))
		}
	}
	return n
}

// bySymbol sums the resident bytes of a section's symbols by package. A
// symbol without a size (the linker gives none to many read-only data
// symbols) reaches to the next one; bytes before the first symbol count as
// "(no symbol)".
func bySymbol(sec *elf.Section, syms []elf.Symbol, present map[uint64]bool) map[string]int64 {
	out := map[string]int64{}
	if sec == nil {
		return out
	}
	end := sec.Addr + sec.Size
	var in []elf.Symbol
	for _, s := range syms {
		if s.Value >= sec.Addr && s.Value < end {
			in = append(in, s)
		}
	}
	sort.SliceStable(in, func(i, j int) bool { return in[i].Value < in[j].Value })
	covered := int64(0)
	for i, s := range in {
		next := end
		if i+1 < len(in) {
			next = in[i+1].Value
		}
		stop := min(s.Value+s.Size, end)
		if s.Size == 0 {
			stop = next
		}
		n := residentBytes(present, s.Value, stop)
		out[Package(s.Name)] += n
		covered += n
	}
	if rest := residentBytes(present, sec.Addr, end) - covered; rest > 0 {
		out["(no symbol)"] += rest
	}
	return out
}

// Package is the import path a symbol belongs to, or a group name for the
// linker's own symbols: "type:*net/http.Client" is net/http's,
// "go:string.*" is (strings).
func Package(sym string) string {
	for _, p := range []string{"type:.eq.", "type:.namedata.", "type:.importpath.", "type:", "go:itab.", "go:info."} {
		if strings.HasPrefix(sym, p) {
			sym = sym[len(p):]
			break
		}
	}
	sym = strings.TrimLeft(sym, "*[]")
	switch {
	case strings.HasPrefix(sym, "go:"), strings.HasPrefix(sym, "runtime.gcbits."):
		name, _, _ := strings.Cut(sym, ".")
		return "(" + name + ")"
	case strings.HasPrefix(sym, "map["), strings.HasPrefix(sym, "func("), strings.HasPrefix(sym, "struct {"),
		strings.HasPrefix(sym, "chan "), strings.HasPrefix(sym, "interface {"), strings.HasPrefix(sym, "noalg."):
		return "(composite types)"
	}
	slash := strings.LastIndexByte(sym, '/')
	if slash < 0 {
		slash = 0
	}
	if dot := strings.IndexByte(sym[slash:], '.'); dot >= 0 {
		return sym[:slash+dot]
	}
	return sym
}

// pclntabByPackage attributes the resident pages of the function table
// (per function: its _func record and its pc-value tables) to packages;
// the name, file and compilation-unit tables are counted as themselves.
func pclntabByPackage(f *elf.File, syms []elf.Symbol, present map[uint64]bool) (map[string]int64, error) {
	sec := f.Section(".gopclntab")
	if sec == nil {
		return nil, errors.New("no .gopclntab section")
	}
	data, err := sec.Data()
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	word := func(i int) uint64 { return le.Uint64(data[8+8*i:]) }
	// pcHeader: magic and 4 bytes, then nfunc, nfiles, an unused word,
	// funcname, cu, filetab, pctab and pcln offsets.
	nfunc := int(word(0))
	regions := []struct {
		name string
		off  uint64
	}{{"(pclntab: function names)", word(3)}, {"(pclntab: compilation units)", word(4)}, {"(pclntab: file names)", word(5)}, {"pctab", word(6)}, {"functab", word(7)}}
	out := map[string]int64{}
	for i, r := range regions[:3] {
		out[r.name] = residentBytes(present, sec.Addr+r.off, sec.Addr+regions[i+1].off)
	}
	pctab, pcln := word(6), word(7)
	names := data[word(3):]
	// In function order (the ftab's), each function's _func record, and
	// the pc-value tables it was the first to use: the linker writes both
	// in that order and shares a table that an earlier function has.
	type fn struct {
		pkg              string
		funcOff, pcStart uint64 // pcStart 0: no table of its own
	}
	fns := make([]fn, 0, nfunc)
	seen := uint64(0)
	for i := range nfunc {
		funcOff := uint64(le.Uint32(data[pcln+uint64(i)*8+4:]))
		rec := data[pcln+funcOff:]
		nameOff := le.Uint32(rec[4:])
		name, _, _ := strings.Cut(string(names[nameOff:min(int(nameOff)+512, len(names))]), "\x00")
		// pcsp, pcfile, pcln, then npcdata pcdata offsets after the
		// 44-byte fixed part.
		offs := []uint32{le.Uint32(rec[16:]), le.Uint32(rec[20:]), le.Uint32(rec[24:])}
		for j := range le.Uint32(rec[28:]) {
			offs = append(offs, le.Uint32(rec[44+4*j:]))
		}
		f := fn{pkg: Package(name), funcOff: funcOff}
		for _, o := range offs {
			if o := uint64(o); o > seen {
				if f.pcStart == 0 || o < f.pcStart {
					f.pcStart = o
				}
			}
		}
		for _, o := range offs {
			seen = max(seen, uint64(o))
		}
		fns = append(fns, f)
	}
	// After the _func records: the functions' stack maps and inlining
	// trees (go:func.*), and the pc lookup table (runtime.findfunctab).
	funcsEnd := uint64(sec.Size)
	for _, s := range syms {
		if s.Value > sec.Addr+pcln && s.Value < sec.Addr+sec.Size && (strings.HasPrefix(s.Name, "go:func.") || s.Name == "runtime.findfunctab") {
			funcsEnd = min(funcsEnd, s.Value-sec.Addr)
		}
	}
	out["(pclntab: stack maps, inlining trees, pc lookup)"] = residentBytes(present, sec.Addr+funcsEnd, sec.Addr+sec.Size)
	out["(pclntab: pc to function index)"] = residentBytes(present, sec.Addr+pcln, sec.Addr+pcln+fns[0].funcOff)
	for i, f := range fns {
		end := funcsEnd - pcln
		if i+1 < nfunc {
			end = fns[i+1].funcOff
		}
		out[f.pkg] += residentBytes(present, sec.Addr+pcln+f.funcOff, sec.Addr+pcln+end)
	}
	for i, f := range fns {
		if f.pcStart == 0 {
			continue
		}
		end := pcln - pctab
		for _, g := range fns[i+1:] {
			if g.pcStart != 0 {
				end = g.pcStart
				break
			}
		}
		out[f.pkg] += residentBytes(present, sec.Addr+pctab+f.pcStart, sec.Addr+pctab+end)
	}
	return out, nil
}

// Print writes the sections and the top packages of each attributed
// section.
func (r *Report) Print(w io.Writer, top int) {
	var total int64
	for _, s := range r.Sections {
		total += s.Resident
		fmt.Fprintf(w, "  %-14s %6.2f of %6.2f MB resident\n", s.Name, mb(s.Resident), mb(s.Size))
	}
	fmt.Fprintf(w, "  %-14s %6.2f MB\n", "all", mb(total))
	for _, name := range []string{"modules", ".text", ".rodata", ".gopclntab"} {
		pkgs := r.ByPackage[name]
		if name == "modules" {
			pkgs = r.ByModule()
		}
		keys := make([]string, 0, len(pkgs))
		for k := range pkgs {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return pkgs[keys[i]] > pkgs[keys[j]] })
		fmt.Fprintf(w, "  %s, resident by package (top %d of %d):\n", name, min(top, len(keys)), len(keys))
		for _, k := range keys[:min(top, len(keys))] {
			fmt.Fprintf(w, "    %6.3f MB %s\n", mb(pkgs[k]), k)
		}
	}
}

// ByModule sums the resident bytes of .text, .rodata and .gopclntab by
// module (or group: k8s.io/api counts apart from the rest of k8s.io, the
// standard library as "(std)"), the unit a dependency is cut by.
func (r *Report) ByModule() map[string]int64 {
	out := map[string]int64{}
	for _, pkgs := range r.ByPackage {
		for pkg, n := range pkgs {
			out[Module(pkg)] += n
		}
	}
	return out
}

// Module is the module a package path belongs to, roughly: the first
// three elements of a github.com path, two of other hosts, "(std)" for a
// path without a host.
func Module(pkg string) string {
	parts := strings.Split(pkg, "/")
	switch {
	case strings.HasPrefix(pkg, "("):
		return pkg
	case !strings.Contains(parts[0], "."):
		return "(std)"
	case parts[0] == "github.com" || parts[0] == "golang.org" && len(parts) > 2 || parts[0] == "go.opentelemetry.io" && len(parts) > 2:
		return strings.Join(parts[:min(3, len(parts))], "/")
	}
	return strings.Join(parts[:min(2, len(parts))], "/")
}

func mb(n int64) float64 { return float64(n) / 1e6 }
